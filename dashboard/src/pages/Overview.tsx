import { BarChart } from '@mantine/charts';
import { Paper, SimpleGrid, Stack, Text, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Loaded, Page, RouterAnchor } from '../ui';

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
