import { useEffect, useState } from 'react';
import { Button, Checkbox, Paper, Select, SimpleGrid, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { ChainName, CHAINS } from '@svc/contract';
import { fieldMessage, ok, unplaced } from '../api';
import { useWorkspace } from '../session';
import { ErrorLine, Loaded, Page, useAction } from '../ui';

/** Chains a merchant of this mode can receive on: Base in live mode, Base Sepolia in test mode. */
const chainsFor = (live: boolean) => ChainName.options.filter((c) => CHAINS[c].livemode === live);

export function ReceivingPage() {
  const ws = useWorkspace();
  const live = ws.mode === 'live';
  const current = useQuery({ queryKey: ws.key('receiving'), enabled: Boolean(ws.merchant), queryFn: () => ok(ws.api.receiving.get({ query: ws.mq })) });
  const [useX402, setUseX402] = useState(true);
  const [chain, setChain] = useState<string | null>(chainsFor(live)[0] ?? null);
  const [address, setAddress] = useState('');
  const [useMock, setUseMock] = useState(!live);
  const [mockAccount, setMockAccount] = useState('acct_test');
  useEffect(() => {
    const r = current.data?.receiving;
    if (!r) return;
    setUseX402(Boolean(r.x402));
    if (r.x402) {
      setChain(r.x402.chain);
      setAddress(r.x402.address);
    }
    setUseMock(Boolean(r.mock));
    if (r.mock) setMockAccount(r.mock.account);
  }, [current.data]);
  const save = useAction(
    () =>
      ok(
        ws.api.receiving.put({
          query: ws.mq,
          body: {
            receiving: {
              ...(useX402 && chain ? { x402: { chain: chain as ChainName, address: address.trim() } } : {}),
              ...(useMock ? { mock: { account: mockAccount.trim() } } : {}),
            },
          },
        }),
      ),
    { success: 'Receiving saved.' },
  );
  if (!ws.merchant && !ws.merchantsLoading) return <Page title="Receiving"><Text>Create a merchant first.</Text></Page>;
  return (
    <Page title="Receiving">
      <Text size="sm" c="dimmed">
        Where payments to {ws.merchant?.name} go. The service never holds funds: USDC moves straight from the agent's wallet to this address.
      </Text>
      <Loaded q={current}>
        {() => (
          <Paper withBorder p="md" maw={560}>
            <form
              onSubmit={(e) => {
                e.preventDefault();
                save.mutate(undefined);
              }}
            >
              <Stack>
                {/* a finding about a field shows under it, in words; the rest above the form */}
                <ErrorLine error={unplaced(save.error, ['receiving.x402.address', 'receiving.x402.chain', 'receiving.mock.account'])} />
                <Title order={2} fz="h4">
                  USDC (x402)
                </Title>
                <Checkbox label="Accept USDC through x402" checked={useX402} onChange={(e) => setUseX402(e.currentTarget.checked)} />
                <SimpleGrid cols={{ base: 1, sm: 2 }}>
                  <Select label="Chain" disabled={!useX402} allowDeselect={false} value={chain} onChange={setChain} data={chainsFor(live)} error={fieldMessage(save.error, 'receiving.x402.chain')} />
                  <TextInput
                    label="Receiving address"
                    description="Your wallet: 0x followed by 40 hexadecimal characters"
                    placeholder="0x…"
                    disabled={!useX402}
                    value={address}
                    onChange={(e) => setAddress(e.currentTarget.value)}
                    error={fieldMessage(save.error, 'receiving.x402.address')}
                  />
                </SimpleGrid>
                {!live && (
                  <>
                    <Title order={2} fz="h4">
                      Mock rail (test mode only)
                    </Title>
                    <Checkbox label="Accept the mock rail" checked={useMock} onChange={(e) => setUseMock(e.currentTarget.checked)} />
                    <TextInput label="Mock account" disabled={!useMock} value={mockAccount} onChange={(e) => setMockAccount(e.currentTarget.value)} error={fieldMessage(save.error, 'receiving.mock.account')} />
                  </>
                )}
                <Button type="submit" loading={save.isPending} w="fit-content">
                  Save receiving
                </Button>
              </Stack>
            </form>
          </Paper>
        )}
      </Loaded>
    </Page>
  );
}
