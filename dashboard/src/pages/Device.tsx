import { useState } from 'react';
import { useSearchParams } from 'react-router';
import { Alert, Anchor, Button, Center, Code, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { apiClient, errorText, ok } from '../api';

/**
 * Confirms a device-code sign-in started by `svc login` (RFC 8628). Signed in: one click.
 * Signed out: the mailed link signs the person in and approves the code in one step.
 */
export function DevicePage() {
  const [params] = useSearchParams();
  const approvedCode = params.get('approved');
  const [code, setCode] = useState(params.get('user_code') ?? '');
  const [email, setEmail] = useState('');
  const api = apiClient('test');
  const me = useQuery({ queryKey: ['me'], queryFn: () => ok(api.me.get()), retry: false });
  const approve = useMutation({ mutationFn: () => ok(api.auth.cliApprove({ body: { user_code: code } })) });
  const mail = useMutation({ mutationFn: () => ok(api.auth.emailStart({ body: { email, user_code: code } })) });

  let content;
  if (approvedCode || approve.isSuccess)
    content = (
      <Alert color="green" title="Device approved" role="status">
        The command line that showed <Code>{approvedCode ?? code}</Code> is signed in. Go back to your terminal.
      </Alert>
    );
  else if (me.isLoading) content = <Text>Loading…</Text>;
  else if (me.data)
    content = (
      <Stack>
        <Text>
          Signed in as <strong>{me.data.user?.email}</strong>. Confirm only a code that your own terminal shows.
        </Text>
        <TextInput label="Code shown by the command line" value={code} onChange={(e) => setCode(e.currentTarget.value)} error={approve.isError ? errorText(approve.error) : undefined} />
        <Button onClick={() => approve.mutate()} loading={approve.isPending} disabled={code.trim().length < 8}>
          Approve this device
        </Button>
      </Stack>
    );
  else if (mail.isSuccess)
    content = (
      <Stack>
        <Alert color="green" title="Check your email" role="status">
          Following the link signs you in and approves <Code>{code}</Code>.
        </Alert>
        {mail.data.verify_url && (
          <Anchor href={mail.data.verify_url} data-testid="dev-signin-link">
            Open the sign-in link (development server)
          </Anchor>
        )}
      </Stack>
    );
  else
    content = (
      <form
        onSubmit={(e) => {
          e.preventDefault();
          mail.mutate();
        }}
      >
        <Stack>
          <TextInput label="Code shown by the command line" required value={code} onChange={(e) => setCode(e.currentTarget.value)} />
          <TextInput label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.currentTarget.value)} error={mail.isError ? errorText(mail.error) : undefined} />
          <Button type="submit" loading={mail.isPending}>
            Email me a link that approves it
          </Button>
        </Stack>
      </form>
    );

  return (
    <Center mih="100vh" p="md">
      <Paper withBorder p="xl" w={460} maw="100%" component="main">
        <Stack>
          <Title order={1} fz="h2">
            Sign in a command line
          </Title>
          {content}
        </Stack>
      </Paper>
    </Center>
  );
}
