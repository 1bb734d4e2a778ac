import { useState } from 'react';
import { useParams } from 'react-router';
import { Alert, Badge, Button, Code, Group, List, Paper, Stack, Table, Text } from '@mantine/core';
import { TRUST_TIER_MEANING, type SessionView, type TrustTier } from '@svc/contract';
import { useQuery } from '@tanstack/react-query';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Confirm, ErrorLine, Loaded, money, Page, RouterAnchor, useAction, when, StackTable } from '../ui';

export function timeLeft(untilUnix: number | undefined, nowMs = Date.now()): string {
  if (!untilUnix) return '—';
  const s = Math.floor(untilUnix - nowMs / 1000);
  if (s <= 0) return 'expired';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : `${m} min`;
}

/** The verdict's reasons in words (the server's verdictReasons: which policy rule decided, on what), the rule's field name beside each. */
export function VerdictReasons({ session, compact = false }: { session: Pick<SessionView, 'verdict' | 'verdictReasons'>; compact?: boolean }) {
  const reasons = session.verdictReasons ?? session.verdict?.reasonCodes.map((code) => ({ code, rule: null, text: code })) ?? [];
  if (reasons.length === 0) return <>—</>;
  if (compact) return <>{reasons.map((r) => r.text).join(' ')}</>;
  return (
    <List size="sm" spacing={2} data-testid="verdict-reasons">
      {reasons.map((r) => (
        <List.Item key={r.code}>
          {r.text}{' '}
          <Text span size="xs" c="dimmed">
            ({r.rule ? <>rule <Code>{r.rule}</Code>, </> : null}code {r.code})
          </Text>
        </List.Item>
      ))}
    </List>
  );
}

/** The gate's trust tier with what it means (never confused with the reputation tier). */
export const trustTierText = (tier: TrustTier) => `${tier}: ${TRUST_TIER_MEANING[tier]}`;

/** The review queue: held orders whose session is still waiting for a decision. */
export function HoldsPage() {
  const ws = useWorkspace();
  const queue = useQuery({
    queryKey: ws.key('holds'),
    enabled: !ws.merchantsLoading,
    queryFn: async () => {
      const held = await ok(ws.api.orders.list({ query: { ...ws.mq, decision: 'hold', limit: 100 } }));
      const sessions = await Promise.all(held.data.map((o) => ok(ws.api.sessions.get({ params: { id: o.session_id } }))));
      return sessions.filter((s) => s.state === 'held');
    },
  });
  return (
    <Page title="Holds">
      <Text c="dimmed" size="sm">
        Orders the policy held for a person to review. An unanswered hold is rejected when its 24 h window ends.
      </Text>
      <Loaded q={queue}>
        {(sessions) =>
          sessions.length === 0 ? (
            <Text>Nothing is waiting for review.</Text>
          ) : (
            <StackTable cols={['Session', 'Total', 'Why it was held', 'Agent', 'Time left']} aria-label="Held orders" highlightOnHover>
                <Table.Tbody>
                  {sessions.map((s) => (
                    <Table.Tr key={s.id} data-testid="hold-row">
                      <Table.Td>
                        <RouterAnchor to={ws.to(`holds/${s.id}`)}>{s.id}</RouterAnchor>
                      </Table.Td>
                      <Table.Td>{money(s.total)}</Table.Td>
                      <Table.Td>
                        <Text size="sm">
                          <VerdictReasons session={s} compact />
                        </Text>
                      </Table.Td>
                      <Table.Td>
                        <Text size="sm" truncate="end" maw={200}>
                          {s.agentId}
                        </Text>
                      </Table.Td>
                      <Table.Td>{timeLeft(s.reviewExpiresAt)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </StackTable>
          )
        }
      </Loaded>
    </Page>
  );
}

/** One held session: where `review_url` lands. */
export function HoldPage() {
  const { sessionId = '' } = useParams();
  const ws = useWorkspace();
  const [asking, setAsking] = useState<'approve' | 'decline' | null>(null);
  const session = useQuery({ queryKey: ws.key('session', sessionId), queryFn: () => ok(ws.api.sessions.get({ params: { id: sessionId } })) });
  const agentId = session.data?.agentId;
  const reputation = useQuery({
    queryKey: ws.key('agent-rep', agentId),
    enabled: Boolean(agentId),
    queryFn: () => ok(ws.api.reputation.agent({ params: { agentId: agentId! } })),
  });
  const approve = useAction(() => ok(ws.api.sessions.approve({ params: { id: sessionId } })), {
    success: (r) => ('order_id' in r && r.status !== 'settlement_pending' && r.status !== 'awaiting_reauthorization' ? 'Approved: the payment was captured.' : `Approved: ${r.status.replaceAll('_', ' ')}.`),
    onDone: () => setAsking(null),
  });
  const decline = useAction(() => ok(ws.api.sessions.decline({ params: { id: sessionId } })), { success: 'Declined.', onDone: () => setAsking(null) });

  return (
    <Page title={`Review ${sessionId}`}>
      <Loaded q={session}>
        {(s) => (
          <Stack>
            <Paper withBorder p="md">
              <Stack gap={6}>
                <Group>
                  <Text fw={600}>State</Text>
                  <Badge data-testid="session-state" variant="light" color={s.state === 'held' ? 'yellow' : s.state === 'accepted' ? 'teal' : 'gray'}>
                    {s.state}
                  </Badge>
                </Group>
                <Text>Total: {money(s.total)}</Text>
                <Text>Items: {s.lines.map((l) => `${l.qty} × ${l.name}`).join(', ')}</Text>
                <Text fw={600}>{s.state === 'held' ? 'Why it was held' : 'Why the gate decided so'}</Text>
                <VerdictReasons session={s} />
                <Text>Trust tier (the gate's, read by the policy's tier rules): {s.verdict ? trustTierText(s.verdict.tier) : '—'}</Text>
                <Text style={{ overflowWrap: 'anywhere' }}>Agent: {s.agentId}</Text>
                {reputation.data && (
                  <Text data-testid="agent-reputation">
                    Reputation (from the reputation service): score {reputation.data.score}, reputation tier {reputation.data.tier}
                    {reputation.data.known ? '' : ', an agent it does not know yet'}
                  </Text>
                )}
                {s.state === 'held' && <Text data-testid="time-left">Time left to review: {timeLeft(s.reviewExpiresAt)} (until {when(s.reviewExpiresAt)})</Text>}
              </Stack>
            </Paper>
            {s.state === 'held' ? (
              <Group>
                <Button color="teal" onClick={() => setAsking('approve')}>
                  Approve
                </Button>
                <Button color="red" variant="outline" onClick={() => setAsking('decline')}>
                  Decline
                </Button>
              </Group>
            ) : (
              <Alert color={s.state === 'accepted' ? 'teal' : 'gray'} role="status">
                This session is {s.state}. {s.orderId && <RouterAnchor to={ws.to(`orders/${s.id}`)}>Open the order</RouterAnchor>}
              </Alert>
            )}
            <ErrorLine error={approve.error ?? decline.error} />
            <Confirm
              opened={asking === 'approve'}
              title="Approve this order?"
              confirmLabel="Approve and capture"
              color="teal"
              busy={approve.isPending}
              onClose={() => setAsking(null)}
              onConfirm={() => approve.mutate(undefined)}
            >
              The agent's authorization for {money(s.total)} is captured now and a receipt is issued.
            </Confirm>
            <Confirm
              opened={asking === 'decline'}
              title="Decline this order?"
              confirmLabel="Decline"
              color="red"
              busy={decline.isPending}
              onClose={() => setAsking(null)}
              onConfirm={() => decline.mutate(undefined)}
            >
              The order is rejected and no money moves.
            </Confirm>
          </Stack>
        )}
      </Loaded>
    </Page>
  );
}
