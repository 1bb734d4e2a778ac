import { useState } from 'react';
import { Badge, Button, Code, Select, Table, Text, TextInput } from '@mantine/core';
import { ChainName, CHAINS } from '@svc/contract';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Page, useAction, when, TableHead, ModalForm } from '../ui';

export function MerchantsPage() {
  const ws = useWorkspace();
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
      <Table.ScrollContainer minWidth={560}>
        <Table aria-label="Merchants">
          <TableHead cols={['Name', 'Slug', 'Domain', 'Rails', 'Created']} />
          <Table.Tbody>
            {ws.merchants.map((m) => (
              <Table.Tr key={m.id} data-testid="merchant-row">
                <Table.Td>
                  {m.name} {m.is_default && <Badge variant="light">default</Badge>}
                </Table.Td>
                <Table.Td>
                  <Code>{m.slug}</Code>
                </Table.Td>
                <Table.Td>{m.domain}</Table.Td>
                <Table.Td>{m.rails.join(', ')}</Table.Td>
                <Table.Td>{when(m.created_at)}</Table.Td>
              </Table.Tr>
            ))}
          </Table.Tbody>
        </Table>
      </Table.ScrollContainer>
      {ws.merchants.length === 0 && <Text c="dimmed">No merchants in {ws.mode} mode yet.</Text>}
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
