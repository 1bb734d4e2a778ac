import { useState } from 'react';
import { Anchor, Badge, Button, Code, Group, MultiSelect, Paper, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { SCOPES } from '@svc/contract';
import { ok } from '../api';
import { SecretOnce } from '../SecretOnce';
import { useWorkspace } from '../session';
import { Confirm, ErrorLine, Loaded, Page, useAction, when, StackTable, ModalForm } from '../ui';

export function DevelopersPage() {
  const ws = useWorkspace();
  const [creating, setCreating] = useState(false);
  const [name, setName] = useState('');
  const [scopes, setScopes] = useState<string[]>([]);
  const [secret, setSecret] = useState<string | null>(null);
  const [revoking, setRevoking] = useState<{ id: string; label: string } | null>(null);
  const [rolling, setRolling] = useState<{ id: string; label: string } | null>(null);
  const keys = useQuery({ queryKey: ws.key('keys'), queryFn: () => ok(ws.api.keys.list({ query: { limit: 100 } })) });
  const create = useAction(
    () => ok(ws.api.keys.create({ body: { mode: ws.mode, ...(name.trim() ? { name: name.trim() } : {}), ...(scopes.length ? { scopes: scopes as [(typeof SCOPES)[number]] } : {}) } })),
    {
      onDone: (k) => {
        setCreating(false);
        setName('');
        setScopes([]);
        setSecret(k.secret);
      },
    },
  );
  const roll = useAction((id: string) => ok(ws.api.keys.roll({ params: { id }, body: { grace_period_seconds: 86_400 } })), {
    onDone: (k) => {
      setRolling(null);
      setSecret(k.secret);
    },
  });
  const revoke = useAction((id: string) => ok(ws.api.keys.revoke({ params: { id } })), { success: 'Key revoked.', onDone: () => setRevoking(null) });
  const origin = window.location.origin;
  const m = ws.merchant;
  return (
    <Page title="Developers">
      <Paper withBorder p="md">
        <Stack gap="xs">
          <Title order={2} fz="h4">
            Endpoints and documents
          </Title>
          <Text size="sm">
            API reference: <Anchor href="/docs">/docs</Anchor> · OpenAPI: <Anchor href="/openapi.json">/openapi.json</Anchor>
          </Text>
          {m && (
            <>
              <Text size="sm">
                Receipt keys (JWKS) of {m.name}: <Code data-testid="jwks-url">{`${origin}/m/${m.slug}/.well-known/jwks.json`}</Code>
              </Text>
              <Text size="sm">
                Manifest agents discover: <Code>{`${origin}/m/${m.slug}/.well-known/agentic-checkout.json`}</Code>
              </Text>
            </>
          )}
        </Stack>
      </Paper>
      <Group justify="space-between">
        <Title order={2} fz="h4">
          API keys ({ws.mode})
        </Title>
        <Button onClick={() => { create.reset(); setCreating(true); }}>Create key</Button>
      </Group>
      <ErrorLine error={roll.error ?? revoke.error} />
      <Loaded q={keys}>
        {(page) => (
          <>
          <StackTable cols={['Name', 'Key', 'Scopes', 'Last used', 'Status', 'Actions']} aria-label="API keys">
              <Table.Tbody>
                {page.data.map((k) => {
                  const label = k.name ?? `…${k.last4}`;
                  const active = !k.revoked_at;
                  return (
                    <Table.Tr key={k.id} data-testid="key-row">
                      <Table.Td>{k.name ?? '—'}</Table.Td>
                      <Table.Td>
                        <Code>{`svc_${k.mode}_…${k.last4}`}</Code>
                      </Table.Td>
                      <Table.Td>{k.restricted ? k.scopes.join(', ') : 'all'}</Table.Td>
                      <Table.Td>{when(k.last_used_at)}</Table.Td>
                      <Table.Td>
                        {k.revoked_at ? <Badge color="gray">revoked</Badge> : k.expires_at ? <Badge color="yellow">expires {when(k.expires_at)}</Badge> : <Badge color="teal">active</Badge>}
                      </Table.Td>
                      <Table.Td>
                        {active && (
                          <Group gap="xs">
                            <Button size="xs" variant="default" onClick={() => setRolling({ id: k.id, label })} aria-label={`Roll ${label}`}>
                              Roll
                            </Button>
                            <Button size="xs" color="red" variant="subtle" onClick={() => setRevoking({ id: k.id, label })} aria-label={`Revoke ${label}`}>
                              Revoke
                            </Button>
                          </Group>
                        )}
                      </Table.Td>
                    </Table.Tr>
                  );
                })}
              </Table.Tbody>
            </StackTable>
            {page.data.length === 0 && <Text c="dimmed">No keys in {ws.mode} mode.</Text>}
          </>
        )}
      </Loaded>
      <ModalForm opened={creating} onClose={() => setCreating(false)} title={`Create a ${ws.mode} key`} action={create} submitLabel="Create key">
        <TextInput label="Name" placeholder="e.g. store backend" value={name} onChange={(e) => setName(e.currentTarget.value)} />
        <MultiSelect label="Scopes" description="Leave empty for a standard key with every scope." data={[...SCOPES]} value={scopes} onChange={setScopes} searchable />
      </ModalForm>
      <Confirm opened={rolling !== null} title={`Roll ${rolling?.label ?? ''}?`} confirmLabel="Roll" busy={roll.isPending} onClose={() => setRolling(null)} onConfirm={() => rolling && roll.mutate(rolling.id)}>
        A new secret is issued; the old one keeps working for 24 hours so you can deploy the new one.
      </Confirm>
      <Confirm opened={revoking !== null} title={`Revoke ${revoking?.label ?? ''}?`} confirmLabel="Revoke" color="red" busy={revoke.isPending} onClose={() => setRevoking(null)} onConfirm={() => revoking && revoke.mutate(revoking.id)}>
        Requests with this key fail at once. This cannot be undone.
      </Confirm>
      <SecretOnce secret={secret} title="API key" onClose={() => setSecret(null)} />
    </Page>
  );
}
