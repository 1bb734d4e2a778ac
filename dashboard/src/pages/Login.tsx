import { useState } from 'react';
import { Alert, Anchor, Button, Center, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation } from '@tanstack/react-query';
import { apiClient, errorText, ok } from '../api';

const NEXT = 'svc.next';

/** Where to go after sign-in: only a path inside the dashboard (never another origin). */
export function rememberNext(path: string) {
  if (path.startsWith('/') && !path.startsWith('//') && !path.startsWith('/login')) localStorage.setItem(NEXT, path);
}
/** The page to return to after sign-in (read without side effects: React may render twice). */
export function pendingNext(): string | null {
  const next = localStorage.getItem(NEXT);
  return next && next.startsWith('/') && !next.startsWith('//') && !next.startsWith('/login') ? next : null;
}
export function clearNext() {
  localStorage.removeItem(NEXT);
}

export function LoginPage() {
  const [email, setEmail] = useState('');
  const start = useMutation({ mutationFn: (address: string) => ok(apiClient('test').auth.emailStart({ body: { email: address } })) });
  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={420} maw="100%" component="main">
        <Stack>
          <Title order={1} fz="h2">
            Sign in to svc-checkout
          </Title>
          {start.isSuccess ? (
            <Stack>
              <Alert color="green" title="Check your email" role="status">
                We sent a sign-in link to {email}. It works once, for 15 minutes.
              </Alert>
              {start.data.verify_url && (
                <Text size="sm">
                  Development server: the link is also here.{' '}
                  <Anchor href={start.data.verify_url} data-testid="dev-signin-link">
                    Open the sign-in link
                  </Anchor>
                </Text>
              )}
              <Button variant="subtle" onClick={() => start.reset()}>
                Use another email
              </Button>
            </Stack>
          ) : (
            <form
              onSubmit={(e) => {
                e.preventDefault();
                start.mutate(email);
              }}
            >
              <Stack>
                <TextInput
                  label="Email"
                  type="email"
                  autoComplete="email"
                  required
                  value={email}
                  onChange={(e) => setEmail(e.currentTarget.value)}
                  error={start.isError ? errorText(start.error) : undefined}
                />
                <Button type="submit" loading={start.isPending}>
                  Email me a sign-in link
                </Button>
              </Stack>
            </form>
          )}
        </Stack>
      </Paper>
    </Center>
  );
}
