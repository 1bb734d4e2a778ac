import { useState } from 'react';
import { Badge, Button, Code, Group, Select, Stack, Table, Text, TextInput } from '@mantine/core';
import { ChainName, CHAINS, type Merchant } from '@svc/contract';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Page, useAction, when, StackTable, ModalForm } from '../ui';

export function MerchantsPage() {
  const ws = useWorkspace();
  const [verifying, setVerifying] = useState<Merchant | null>(null);
  const live = ws.mode === 'live';
  const [creating, setCreating] = useState(false);
  const [name, setName] = useState('');
  const [slug, setSlug] = useState('');
  const [domain, setDomain] = useState('');
  const chains = ChainName.options.filter((c) => CHAINS[c].livemode === live);
  const [chain, setChain] = useState<string | null>(chains[0] ?? null);
  const [address, setAddress] = useState('');
  const create = useAction(
    () =>
      ok(
        ws.api.merchants.create({
          body: {
            name: name.trim(),
            slug: slug.trim(),
            domain: domain.trim(),
            receiving: {
              ...(address.trim() && chain ? { x402: { chain: chain as ChainName, address: address.trim() } } : {}),
              ...(!live ? { mock: { account: `acct_${slug.trim() || 'test'}` } } : {}),
            },
          },
        }),
      ),
    { success: (m) => `Merchant ${m.name} created.`, onDone: () => setCreating(false) },
  );
  return (
    <Page title="Merchants" actions={<Button onClick={() => { create.reset(); setCreating(true); }}>Create merchant</Button>}>
      <Text size="sm" c="dimmed">
        Storefronts of this project in {ws.mode} mode. The first one is the default; pick the one you work on in the header.
      </Text>
      <StackTable cols={['Name', 'Slug', 'Domain', 'Rails', 'Created']} aria-label="Merchants">
          <Table.Tbody>
            {ws.merchants.map((m) => (
              <Table.Tr key={m.id} data-testid="merchant-row">
                <Table.Td>
                  {m.name} {m.is_default && <Badge variant="light">default</Badge>}
                </Table.Td>
                <Table.Td>
                  <Code>{m.slug}</Code>
                </Table.Td>
                <Table.Td>
                  <Group gap="xs" wrap="nowrap">
                    <span>{m.domain}</span>
                    {m.domain_status === 'verified' ? (
                      <Badge color="green" variant="light">verified</Badge>
                    ) : (
                      <>
                        <Badge color="orange" variant="light" title="Agents do not reach this merchant at its domain until you prove you control it">
                          unverified
                        </Badge>
                        <Button size="compact-xs" variant="default" aria-label={`Verify ${m.domain}`} onClick={() => setVerifying(m)}>
                          Verify
                        </Button>
                      </>
                    )}
                  </Group>
                </Table.Td>
                <Table.Td>{m.rails.join(', ')}</Table.Td>
                <Table.Td>{when(m.created_at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </StackTable>
      {ws.merchants.length === 0 && <Text c="dimmed">No merchants in {ws.mode} mode yet.</Text>}
      {verifying && <VerifyDomain key={verifying.id} merchant={verifying} onClose={() => setVerifying(null)} />}
      <ModalForm opened={creating} onClose={() => setCreating(false)} title={`Create a ${ws.mode} merchant`} action={create} submitLabel="Create merchant">
        <TextInput label="Name" required value={name} onChange={(e) => setName(e.currentTarget.value)} />
        <TextInput label="Slug" description="Lowercase letters, digits and dashes; part of the agent URLs" required value={slug} onChange={(e) => setSlug(e.currentTarget.value)} />
        <TextInput label="Domain" required placeholder="shop.example.com" value={domain} onChange={(e) => setDomain(e.currentTarget.value)} />
        <Select label="USDC chain" allowDeselect={false} value={chain} onChange={setChain} data={chains} />
        <TextInput label="USDC receiving address" required={live} placeholder="0x…" value={address} onChange={(e) => setAddress(e.currentTarget.value)} />
      </ModalForm>
    </Page>
  );
}

/**
 * The merchant's own domain is served to agents only once its owner proves control of it:
 * publish one of the two proofs the API gives (`domain_verification`), then Verify.
 */
function VerifyDomain({ merchant, onClose }: { merchant: Merchant; onClose: () => void }) {
  const ws = useWorkspace();
  const proof = merchant.domain_verification;
  const verify = useAction(() => ok(ws.api.merchants.verifyDomain({ params: { id: merchant.id } })), {
    success: (m) => `${m.domain} is verified: agents now reach ${m.name} there.`,
    onDone: onClose,
  });
  return (
    <ModalForm opened onClose={onClose} title={`Verify ${merchant.domain}`} action={verify} submitLabel="Verify">
      <Text size="sm">
        Agents reach {merchant.name} at <Code>{merchant.domain}</Code> only once you prove you control it. Publish either of these, then press Verify.
      </Text>
      <Stack gap={4} data-testid="domain-proof-txt">
        <Text size="sm" fw={600}>
          A DNS TXT record
        </Text>
        <Text size="sm">
          Name: <Code>{proof.dns_txt.name}</Code>
        </Text>
        <Text size="sm">
          Value: <Code>{proof.dns_txt.value}</Code>
        </Text>
      </Stack>
      <Stack gap={4} data-testid="domain-proof-file">
        <Text size="sm" fw={600}>
          Or a file served over https
        </Text>
        <Text size="sm">
          URL: <Code>{proof.https_file.url}</Code>
        </Text>
        <Text size="sm">
          A line of it: <Code>{proof.https_file.content}</Code>
        </Text>
      </Stack>
    </ModalForm>
  );
}
