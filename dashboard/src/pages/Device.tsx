import { useState } from 'react';
import { Alert, Anchor, Button, Center, Paper, Select, Stack, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { apiClient, errorText, ok } from '../api';
import { rememberNext } from './Login';

/**
 * Approves a device-code sign-in started by `svc login` (RFC 8628). The signed-in person
 * types the code their own terminal shows: the page never takes a code from its address or
 * from a mail, since a code it did not get from the person's terminal may be a stranger's
 * (docs/decisions.md, "Device code"). Signed out, it mails a plain sign-in link that brings
 * the person back here.
 */
export function DevicePage() {
  const [code, setCode] = useState('');
  const [email, setEmail] = useState('');
  // the project the command line's key will belong to (the Svc-Project of the approval): the member's first unless chosen
  const [projectId, setProjectId] = useState<string | null>(null);
  const api = apiClient('test');
  const me = useQuery({ queryKey: ['me'], queryFn: () => ok(api.me.get()), retry: false });
  const project = me.data?.projects.find((p) => p.id === projectId) ?? me.data?.project;
  const approve = useMutation({ mutationFn: () => ok(apiClient('test', project?.id).auth.cliApprove({ body: { user_code: code } })) });
  const mail = useMutation({
    mutationFn: () => {
      rememberNext('/device');
      return ok(api.auth.emailStart({ body: { email } }));
    },
  });

  let content;
  if (approve.isSuccess)
    content = (
      <Alert color="green" title="Device approved" role="status">
        The command line that showed {code.trim().toUpperCase()} is signed in to {project?.name ?? 'your project'}. Go back to your terminal.
      </Alert>
    );
  else if (me.isLoading) content = <Text>Loading…</Text>;
  else if (me.data)
    content = (
      <form
        onSubmit={(e) => {
          e.preventDefault();
          approve.mutate();
        }}
      >
        <Stack>
          <Text>
            Signed in as <strong>{me.data.user?.email}</strong>. Type the code that your own terminal shows: the command line gets a test API key of{' '}
            <strong>{project?.name}</strong>.
          </Text>
          {me.data.projects.length > 1 && (
            <Select label="Project of the key" allowDeselect={false} value={project?.id ?? null} data={me.data.projects.map((p) => ({ value: p.id, label: p.name }))} onChange={setProjectId} />
          )}
          <Alert color="yellow" title="Only a code from your own terminal">
            Never type a code that someone sent you, by mail or otherwise: it would sign their command line in to your account.
          </Alert>
          <TextInput
            label="Code shown by your terminal"
            placeholder="XXXX-XXXX"
            autoComplete="off"
            autoCapitalize="characters"
            spellCheck={false}
            required
            value={code}
            onChange={(e) => setCode(e.currentTarget.value)}
            error={approve.isError ? errorText(approve.error) : undefined}
          />
          <Button type="submit" loading={approve.isPending} disabled={code.replace(/[^A-Za-z]/g, '').length < 8}>
            Approve this device
          </Button>
        </Stack>
      </form>
    );
  else if (mail.isSuccess)
    content = (
      <Stack>
        <Alert color="green" title="Check your email" role="status">
          Follow the link to sign in; you come back to this page and type the code there.
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
          <Text>Sign in first; then type the code your terminal shows.</Text>
          <TextInput label="Email" type="email" autoComplete="email" required value={email} onChange={(e) => setEmail(e.currentTarget.value)} error={mail.isError ? errorText(mail.error) : undefined} />
          <Button type="submit" loading={mail.isPending}>
            Email me a sign-in link
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
