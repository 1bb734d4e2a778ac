import { useState } from 'react';
import { useParams } from 'react-router';
import { Alert, Badge, Button, Group, Paper, Stack, Table, Text } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Confirm, ErrorLine, Loaded, money, Page, RouterAnchor, useAction, when, TableHead } from '../ui';

export function timeLeft(untilUnix: number | undefined, nowMs = Date.now()): string {
  if (!untilUnix) return '—';
  const s = Math.floor(untilUnix - nowMs / 1000);
  if (s <= 0) return 'expired';
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  return h > 0 ? `${h} h ${m} min` : `${m} min`;
}

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
            <Table.ScrollContainer minWidth={640}>
              <Table aria-label="Held orders" highlightOnHover>
                <TableHead cols={['Session', 'Total', 'Reasons', 'Agent', 'Time left']} />
                <Table.Tbody>
                  {sessions.map((s) => (
                    <Table.Tr key={s.id} data-testid="hold-row">
                      <Table.Td>
                        <RouterAnchor to={ws.to(`holds/${s.id}`)}>{s.id}</RouterAnchor>
                      </Table.Td>
                      <Table.Td>{money(s.total)}</Table.Td>
                      <Table.Td>{s.verdict?.reasonCodes.join(', ')}</Table.Td>
                      <Table.Td>
                        <Text size="sm" truncate="end" maw={200}>
                          {s.agentId}
                        </Text>
                      </Table.Td>
                      <Table.Td>{timeLeft(s.reviewExpiresAt)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </Table>
            </Table.ScrollContainer>
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
                <Text>
                  {s.state === 'held' ? 'Why it was held' : 'Gate reasons'}: {s.verdict?.reasonCodes.join(', ') || '—'}
                </Text>
                <Text>Trust tier: {s.verdict?.tier ?? '—'}</Text>
                <Text>
                  Agent: {s.agentId}
                  {reputation.data && (
                    <>
                      {' '}
                      · reputation {reputation.data.score} ({reputation.data.tier}
                      {reputation.data.known ? '' : ', unknown agent'})
                    </>
                  )}
                </Text>
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
