import { useState } from 'react';
import { Link, useParams } from 'react-router';
import { Anchor, Badge, Button, Code, Group, Paper, Select, SimpleGrid, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useMutation, useQuery } from '@tanstack/react-query';
import { TrustTier, type Decision, type SessionView } from '@svc/contract';
import { verifyReceipt } from '@svc/sdk/receipt';
import { ok } from '../api';
import { Pager, useCursor } from '../paging';
import { useWorkspace } from '../session';
import { ErrorLine, explorerAddress, explorerTx, Loaded, money, Page, RouterAnchor, when, StackTable } from '../ui';
import { trustTierText, VerdictReasons } from './Holds';
import { DeliveryStatus, EventAttempts } from './Webhooks';
import { OrderRefundBadge, RefundsPanel } from './Refunds';

const DECISION_COLOR = { accept: 'teal', reject: 'red', hold: 'yellow' } as const satisfies Record<Decision, string>;

export function DecisionBadge({ decision }: { decision: Decision }) {
  return (
    <Badge color={DECISION_COLOR[decision]} variant="light">
      {decision}
    </Badge>
  );
}

/** `YYYY-MM-DD` in the browser's zone → ISO instant of that local midnight. */
const dayStart = (d: string) => (d ? new Date(`${d}T00:00:00`).toISOString() : undefined);
const dayAfter = (d: string) => {
  if (!d) return undefined;
  const t = new Date(`${d}T00:00:00`);
  t.setDate(t.getDate() + 1);
  return t.toISOString();
};

export function OrdersPage() {
  const ws = useWorkspace();
  const [decision, setDecision] = useState<string | null>(null);
  const [tier, setTier] = useState<string | null>(null);
  const [agent, setAgent] = useState('');
  const [search, setSearch] = useState('');
  const [from, setFrom] = useState('');
  const [to, setTo] = useState('');
  const filters = {
    ...ws.mq,
    ...(decision ? { decision: decision as 'accept' | 'reject' | 'hold' } : {}),
    ...(tier ? { trust_tier: tier as TrustTier } : {}),
    ...(agent.trim() ? { agent_id: agent.trim() } : {}),
    ...(search.trim() ? { q: search.trim() } : {}),
    ...(from ? { created_gte: dayStart(from) } : {}),
    ...(to ? { created_lt: dayAfter(to) } : {}),
  };
  const pager = useCursor(JSON.stringify(filters));
  const orders = useQuery({
    queryKey: ws.key('orders', filters, pager.cursor),
    queryFn: () => ok(ws.api.orders.list({ query: { limit: 20, ...filters, ...(pager.cursor ? { cursor: pager.cursor } : {}) } })),
    enabled: !ws.merchantsLoading,
  });
  const exportCsv = useMutation({
    mutationFn: async () => {
      const csv = await ok(ws.api.orders.export({ query: filters }));
      const url = URL.createObjectURL(new Blob([csv], { type: 'text/csv;charset=utf-8' }));
      const a = Object.assign(document.createElement('a'), { href: url, download: `orders-${ws.mode}${from ? `-from-${from}` : ''}${to ? `-to-${to}` : ''}.csv` });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    },
  });
  return (
    <Page
      title="Orders"
      actions={
        <Button variant="default" loading={exportCsv.isPending} onClick={() => exportCsv.mutate()} title="Every order matching the filters (all pages), as CSV">
          Export CSV
        </Button>
      }
    >
      <ErrorLine error={exportCsv.error} />
      <TextInput
        label="Search"
        description="An order id (ord_…), a session id (sess_…) or an agent id"
        placeholder="ord_…, sess_… or agent id"
        maw={480}
        value={search}
        onChange={(e) => setSearch(e.currentTarget.value)}
      />
      <Group align="flex-end" wrap="wrap">
        <Select label="Decision" clearable w={140} value={decision} onChange={setDecision} data={['accept', 'reject', 'hold']} />
        <Select label="Trust tier" clearable w={150} value={tier} onChange={setTier} data={[...TrustTier.options]} />
        <TextInput label="Agent" placeholder="agent id" w={220} value={agent} onChange={(e) => setAgent(e.currentTarget.value)} />
        <TextInput label="From" type="date" w={160} value={from} onChange={(e) => setFrom(e.currentTarget.value)} />
        <TextInput label="To" type="date" w={160} value={to} onChange={(e) => setTo(e.currentTarget.value)} />
      </Group>
      <Loaded q={orders}>
        {(page) => (
          <Stack>
            <StackTable cols={['Order', 'Decision', 'Total', 'Agent', 'Trust tier', 'Created']} striped highlightOnHover aria-label="Orders">
                <Table.Tbody>
                  {page.data.map((o) => (
                    <Table.Tr key={o.id} data-testid="order-row">
                      <Table.Td>
                        <RouterAnchor to={ws.to(`orders/${o.session_id}`)}>{o.id}</RouterAnchor>
                      </Table.Td>
                      <Table.Td>
                        <Group gap={4} wrap="nowrap">
                          <DecisionBadge decision={o.decision} />
                          <OrderRefundBadge status={o.refund_status} amount={`${o.amount_refunded} ${o.total?.currency ?? ''}`.trim()} />
                          {o.source === 'ingest' && (
                            <Badge variant="outline" color="gray" title="Reported through /v1/ingest by a self-hosted checkout: this service did not settle it or sign its receipt.">
                              ingested
                            </Badge>
                          )}
                        </Group>
                      </Table.Td>
                      <Table.Td>{money(o.total)}</Table.Td>
                      <Table.Td>
                        <Text size="sm" truncate="end" maw={220} title={o.agent_id}>
                          {o.agent_id}
                        </Text>
                      </Table.Td>
                      <Table.Td>{o.trust_tier}</Table.Td>
                      <Table.Td>{when(o.created_at)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </StackTable>
            {page.data.length === 0 && <Text c="dimmed">No orders match.</Text>}
            <Pager page={pager.page} hasMore={page.has_more} nextCursor={page.next_cursor} onNext={pager.next} onPrev={pager.prev} />
          </Stack>
        )}
      </Loaded>
    </Page>
  );
}

/** Verifies the receipt in the browser against the merchant's published key set. */
function useReceiptCheck(session: Pick<SessionView, 'receipt' | 'merchantId' | 'orderId' | 'id' | 'livemode'> | undefined) {
  const ws = useWorkspace();
  return useQuery({
    queryKey: ws.key('receipt-check', session?.id, session?.receipt),
    enabled: Boolean(session?.receipt),
    queryFn: async () => {
      const jwks = await ok(ws.api.merchants.jwks({ params: { id: session!.merchantId } }));
      try {
        const claims = await verifyReceipt(session!.receipt!, {
          jwks,
          expected: { merchantId: session!.merchantId, sessionId: session!.id, livemode: session!.livemode, ...(session!.orderId ? { orderId: session!.orderId } : {}) },
        });
        return { valid: true as const, claims };
      } catch (err) {
        return { valid: false as const, reason: err instanceof Error ? err.message : String(err) };
      }
    },
  });
}

export function OrderPage() {
  const { sessionId = '' } = useParams();
  const ws = useWorkspace();
  const session = useQuery({ queryKey: ws.key('session', sessionId), queryFn: () => ok(ws.api.sessions.get({ params: { id: sessionId } })) });
  const check = useReceiptCheck(session.data);
  const orderId = session.data?.orderId ?? null;
  const events = useQuery({
    queryKey: ws.key('order-events', orderId),
    enabled: Boolean(orderId),
    queryFn: () => ok(ws.api.webhooks.listEvents({ query: { limit: 50, order_id: orderId! } })),
  });
  return (
    <Page title={orderId ? `Order ${orderId}` : `Session ${sessionId}`}>
      <Loaded q={session}>
        {(s) => {
          const explorer = s.settlement ? explorerTx(s.settlement.reference, s.livemode) : null;
          const payerLink = s.payer ? explorerAddress(s.payer, s.livemode) : null;
          const policyVersion = check.data?.valid ? check.data.claims.policyVersion : (s.verdict?.signals as { policyVersion?: number } | undefined)?.policyVersion;
          return (
            <Stack>
              <SimpleGrid cols={{ base: 1, sm: 2 }}>
                <Paper withBorder p="md">
                  <Stack gap={4}>
                    <Group>
                      <Text fw={600}>State</Text>
                      <Badge variant="light">{s.state}</Badge>
                      {s.verdict && <DecisionBadge decision={s.verdict.decision} />}
                    </Group>
                    <Text size="sm" style={{ overflowWrap: 'anywhere' }}>
                      Agent: {s.agentId}
                    </Text>
                    <Text size="sm" style={{ overflowWrap: 'anywhere' }} data-testid="payer">
                      Payer wallet:{' '}
                      {s.payer ? (
                        payerLink ? (
                          <Anchor href={payerLink} target="_blank" rel="noreferrer">
                            {s.payer}
                          </Anchor>
                        ) : (
                          <Code>{s.payer}</Code>
                        )
                      ) : (
                        '—'
                      )}
                    </Text>
                    <Text size="sm">Trust tier: {s.verdict ? trustTierText(s.verdict.tier) : '—'}</Text>
                    <Text size="sm">Why:</Text>
                    <VerdictReasons session={s} />
                    <Text size="sm">Policy version: {policyVersion ?? '—'}</Text>
                    <Text size="sm">Created: {when(s.createdAt)}</Text>
                  </Stack>
                </Paper>
                <Paper withBorder p="md">
                  <Stack gap={4}>
                    <Text fw={600}>Settlement</Text>
                    <Text size="sm">Rail: {s.settlement?.rail ?? s.railName}</Text>
                    <Text size="sm" style={{ wordBreak: 'break-all' }}>
                      Reference:{' '}
                      {s.settlement ? (
                        explorer ? (
                          <Anchor href={explorer} target="_blank" rel="noreferrer">
                            {s.settlement.reference}
                          </Anchor>
                        ) : (
                          <Code>{s.settlement.reference}</Code>
                        )
                      ) : (
                        '—'
                      )}
                    </Text>
                    <Group gap="xs">
                      <Text size="sm">Receipt:</Text>
                      {!s.receipt ? (
                        <Text size="sm">none</Text>
                      ) : check.isLoading ? (
                        <Text size="sm">verifying…</Text>
                      ) : check.data?.valid ? (
                        <Badge color="teal" data-testid="receipt-status">
                          valid
                        </Badge>
                      ) : (
                        <Badge color="red" data-testid="receipt-status" title={check.data && !check.data.valid ? check.data.reason : undefined}>
                          invalid
                        </Badge>
                      )}
                    </Group>
                    {check.data && !check.data.valid && (
                      <Text size="xs" c="red">
                        {check.data.reason}
                      </Text>
                    )}
                  </Stack>
                </Paper>
              </SimpleGrid>
              <StackTable cols={['Item', 'Qty', 'Unit price', 'Line total']} aria-label="Items">
                  <Table.Tbody>
                    {s.lines.map((l) => (
                      <Table.Tr key={l.sku}>
                        <Table.Td>
                          {l.name} <Code>{l.sku}</Code>
                        </Table.Td>
                        <Table.Td>{l.qty}</Table.Td>
                        <Table.Td>{l.unitPrice}</Table.Td>
                        <Table.Td>{l.lineTotal}</Table.Td>
                      </Table.Tr>
                    ))}
                  </Table.Tbody>
                  <Table.Tfoot>
                    <Table.Tr>
                      <Table.Th colSpan={3}>Total</Table.Th>
                      <Table.Th>{money(s.total)}</Table.Th>
                    </Table.Tr>
                  </Table.Tfoot>
                </StackTable>
              {s.state === 'held' && (
                <Button component={Link} to={ws.to(`holds/${s.id}`)} w="fit-content">
                  Review this hold
                </Button>
              )}
              {orderId && <RefundsPanel session={s} />}
              <Title order={2} fz="h4">
                Events
              </Title>
              {!orderId ? (
                <Text c="dimmed">No order yet.</Text>
              ) : (
                <Loaded q={events}>
                  {(list) => (
                    <Stack>
                      {list.data.length === 0 && <Text c="dimmed">No events.</Text>}
                      {list.data.map((e) => (
                        <Paper key={e.id} withBorder p="sm">
                          <Group justify="space-between">
                            <RouterAnchor to={ws.to(`webhooks/events/${e.id}`)}>
                              <span style={{ overflowWrap: 'anywhere' }}>
                                {e.type} · {e.id}
                              </span>
                            </RouterAnchor>
                            <Group gap="xs">
                              <DeliveryStatus eventId={e.id} />
                              <Text size="xs">{when(e.created)}</Text>
                            </Group>
                          </Group>
                          <EventAttempts eventId={e.id} />
                        </Paper>
                      ))}
                    </Stack>
                  )}
                </Loaded>
              )}
            </Stack>
          );
        }}
      </Loaded>
    </Page>
  );
}
