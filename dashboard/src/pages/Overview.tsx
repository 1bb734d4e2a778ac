import { BarChart } from '@mantine/charts';
import { Anchor, Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { errorText, ok } from '../api';
import { useWorkspace } from '../session';
import { explorerAddress, Loaded, Page, RouterAnchor, when } from '../ui';

const tz = Intl.DateTimeFormat().resolvedOptions().timeZone;

function Stat({ label, value, hint, testId }: { label: string; value: string; hint?: string; testId: string }) {
  return (
    <Paper withBorder p="md" data-testid={testId}>
      <Text size="sm" c="dimmed">
        {label}
      </Text>
      <Text fz="xl" fw={700}>
        {value}
      </Text>
      {hint && (
        <Text size="xs" c="dimmed">
          {hint}
        </Text>
      )}
    </Paper>
  );
}

/** Live mode: the receiving address's USDC balance, read on chain (GET /v1/receiving/balance). */
function ReceivingBalance() {
  const ws = useWorkspace();
  const balance = useQuery({ queryKey: ws.key('receiving-balance'), enabled: Boolean(ws.merchant?.receiving.x402), retry: false, queryFn: () => ok(ws.api.receiving.balance({ query: ws.mq })) });
  if (!ws.merchant?.receiving.x402) return null;
  const link = explorerAddress(ws.merchant.receiving.x402.address, true);
  return (
    <Paper withBorder p="md" data-testid="receiving-balance">
      <Text size="sm" c="dimmed">
        USDC at the receiving address, on chain
      </Text>
      {balance.data ? (
        <Text fz="xl" fw={700}>
          {balance.data.balance} USDC
        </Text>
      ) : balance.isError ? (
        <Text size="sm" c="red" role="alert">
          Could not read the balance: {errorText(balance.error)}
        </Text>
      ) : (
        <Text size="sm">reading…</Text>
      )}
      <Text size="xs" c="dimmed" style={{ overflowWrap: 'anywhere' }}>
        {link ? (
          <Anchor href={link} target="_blank" rel="noreferrer">
            {ws.merchant.receiving.x402.address}
          </Anchor>
        ) : (
          ws.merchant.receiving.x402.address
        )}
        {balance.data ? ` · read ${when(balance.data.read_at)}` : ''}
      </Text>
    </Paper>
  );
}

export function OverviewPage() {
  const ws = useWorkspace();
  const summary = useQuery({ queryKey: ws.key('summary', tz), queryFn: () => ok(ws.api.orders.summary({ query: { ...ws.mq, tz } })), enabled: Boolean(ws.merchant) });
  return (
    <Page title="Overview">
      {ws.merchants.length === 0 && !ws.merchantsLoading && (
        <Text>
          No merchant in {ws.mode} mode yet. <RouterAnchor to={ws.to('merchants')}>Create one</RouterAnchor>.
        </Text>
      )}
      <Loaded q={summary}>
        {(s) => (
          <Stack>
            {ws.mode === 'live' && <ReceivingBalance />}
            <SimpleGrid cols={{ base: 1, xs: 2, md: 4 }}>
              <Stat testId="stat-today" label="Accepted today" value={`${s.today.accepted_volume} ${s.currency}`} hint={`${s.today.accepted_count} orders`} />
              <Stat testId="stat-week" label="Accepted, last 7 days" value={`${s.week.accepted_volume} ${s.currency}`} hint={`${s.week.accepted_count} orders`} />
              <Stat
                testId="stat-decisions"
                label="Orders this week by decision"
                value={`${s.week.orders_by_decision.accept} / ${s.week.orders_by_decision.reject} / ${s.week.orders_by_decision.hold}`}
                hint="accepted / rejected / held"
              />
              <Stat testId="stat-attention" label="Needs attention" value={`${s.holds_waiting} held`} hint={`${s.failing_endpoints} failing webhook endpoints`} />
            </SimpleGrid>
            <Paper withBorder p="md">
              <Title order={2} fz="h4" mb="sm">
                Accepted volume, last 14 days ({s.currency})
              </Title>
              <BarChart
                h={240}
                data={s.days.map((d) => ({ date: d.date.slice(5), volume: Number(d.accepted_volume), orders: d.accepted_count }))}
                dataKey="date"
                series={[{ name: 'volume', label: `Volume (${s.currency})`, color: 'teal.6' }]}
                tickLine="y"
                aria-label="Accepted volume per day"
              />
            </Paper>
            <Text size="sm">
              {s.holds_waiting > 0 && <RouterAnchor to={ws.to('holds')}>Review {s.holds_waiting} held orders</RouterAnchor>}{' '}
              {s.failing_endpoints > 0 && <RouterAnchor to={ws.to('webhooks')}>Check failing webhook endpoints</RouterAnchor>}
            </Text>
          </Stack>
        )}
      </Loaded>
    </Page>
  );
}
