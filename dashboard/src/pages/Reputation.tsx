import { useState } from 'react';
import { Badge, Button, Group, Paper, Stack, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { ok } from '../api';
import { useWorkspace } from '../session';
import { Loaded, Page } from '../ui';

export function ReputationPage() {
  const ws = useWorkspace();
  const [input, setInput] = useState('');
  const [agent, setAgent] = useState('');
  const mine = useQuery({
    queryKey: ws.key('merchant-rep'),
    enabled: Boolean(ws.merchant),
    queryFn: () => ok(ws.api.reputation.merchant({ params: { merchantId: ws.merchant!.id } })),
  });
  const theirs = useQuery({ queryKey: ws.key('agent-rep', agent), enabled: agent !== '', queryFn: () => ok(ws.api.reputation.agent({ params: { agentId: agent } })) });
  return (
    <Page title="Reputation">
      <Paper withBorder p="md" maw={560}>
        <Title order={2} fz="h4" mb="xs">
          {ws.merchant?.name ?? 'Merchant'}
        </Title>
        <Loaded q={mine}>
          {(r) => (
            <Group data-testid="merchant-reputation">
              <Text fz="xl" fw={700}>
                {r.score}
              </Text>
              <Badge>{r.tier}</Badge>
              {!r.known && <Text c="dimmed">no history yet</Text>}
            </Group>
          )}
        </Loaded>
      </Paper>
      <Paper withBorder p="md" maw={560}>
        <form
          onSubmit={(e) => {
            e.preventDefault();
            setAgent(input.trim());
          }}
        >
          <Stack>
            <Title order={2} fz="h4">
              Look up an agent
            </Title>
            <Group align="flex-end">
              <TextInput label="Agent id" value={input} onChange={(e) => setInput(e.currentTarget.value)} style={{ flex: 1 }} />
              <Button type="submit" disabled={!input.trim()}>
                Look up
              </Button>
            </Group>
            {agent && (
              <Loaded q={theirs}>
                {(r) => (
                  <Group data-testid="agent-reputation">
                    <Text fw={700}>{r.score}</Text>
                    <Badge>{r.tier}</Badge>
                    <Text c="dimmed">{r.known ? 'known agent' : 'never seen: neutral default'}</Text>
                  </Group>
                )}
              </Loaded>
            )}
          </Stack>
        </form>
      </Paper>
    </Page>
  );
}
