import { useState } from 'react';
import { useParams } from 'react-router';
import { Badge, Button, Code, Group, MultiSelect, Paper, Stack, Table, Text, TextInput, Title } from '@mantine/core';
import { useQuery } from '@tanstack/react-query';
import { EVENT_TYPES } from '@svc/contract';
import { ok } from '../api';
import { Pager, useCursor } from '../paging';
import { SecretOnce } from '../SecretOnce';
import { useWorkspace } from '../session';
import { Confirm, ErrorLine, Loaded, Page, RouterAnchor, useAction, when, StackTable, ModalForm } from '../ui';

const STATUS_COLOR = { pending: 'yellow', enabled: 'teal', disabled: 'gray', succeeded: 'teal', failed: 'red', canceled: 'gray', in_progress: 'blue', lost: 'orange' } as const;
const StatusBadge = ({ status }: { status: keyof typeof STATUS_COLOR }) => (
  <Badge variant="light" color={STATUS_COLOR[status]}>
    {status.replace('_', ' ')}
  </Badge>
);

/** An event's deliveries and every attempt with its response: used on the event and order pages. */
/** One event with its deliveries (GET /v1/events/{id}), cached under one key for every view of it. */
function useEventDetail(eventId: string) {
  const ws = useWorkspace();
  return useQuery({ queryKey: ws.key('event', eventId), queryFn: () => ok(ws.api.webhooks.getEvent({ params: { id: eventId } })) });
}

/** An event's deliveries in one line: each endpoint's status badge, or "no endpoint". */
export function DeliveryStatus({ eventId }: { eventId: string }) {
  const event = useEventDetail(eventId);
  if (!event.data) return <Text size="xs" c="dimmed">{event.isError ? 'unknown' : '…'}</Text>;
  if (event.data.deliveries.length === 0) return <Text size="xs" c="dimmed">no endpoint</Text>;
  return (
    <Group gap={4} data-testid="delivery-status">
      {event.data.deliveries.map((d, i) => (
        <StatusBadge key={`${d.endpoint_id}-${i}`} status={d.status} />
      ))}
    </Group>
  );
}

export function EventAttempts({ eventId }: { eventId: string }) {
  const event = useEventDetail(eventId);
  return (
    <Loaded q={event}>
      {(e) =>
        e.deliveries.length === 0 ? (
          <Text size="sm" c="dimmed">
            Not delivered to any endpoint.
          </Text>
        ) : (
          <Stack gap="xs">
            {e.deliveries.map((d, i) => (
              <Stack key={`${d.endpoint_id}-${i}`} gap={2} data-testid="delivery">
                <Group gap="xs">
                  <Text size="sm">
                    To <Code>{d.endpoint_id}</Code>
                    {d.replay ? ' (replay)' : ''}
                  </Text>
                  <StatusBadge status={d.status} />
                  {d.next_attempt_at && (
                    <Text size="xs" c="dimmed">
                      next attempt {when(d.next_attempt_at)}
                    </Text>
                  )}
                </Group>
                {d.attempts.map((a) => (
                  <Text key={a.id} size="xs" data-testid="attempt">
                    #{a.attempt_number} <StatusBadge status={a.status} /> {a.response_status !== null ? `HTTP ${a.response_status}` : ''} {a.duration_ms !== null ? `${a.duration_ms} ms` : ''} {a.error ?? ''} · {when(a.created_at)}
                  </Text>
                ))}
              </Stack>
            ))}
          </Stack>
        )
      }
    </Loaded>
  );
}

function Endpoints() {
  const ws = useWorkspace();
  const [creating, setCreating] = useState(false);
  const [url, setUrl] = useState('');
  const [events, setEvents] = useState<string[]>(['*']);
  const [secret, setSecret] = useState<string | null>(null);
  const [rotating, setRotating] = useState<string | null>(null);
  const endpoints = useQuery({ queryKey: ws.key('endpoints'), queryFn: () => ok(ws.api.webhooks.listEndpoints({ query: { limit: 100 } })) });
  const create = useAction(() => ok(ws.api.webhooks.createEndpoint({ body: { url: url.trim(), enabled_events: events as ['*'] } })), {
    onDone: (r) => {
      setCreating(false);
      setUrl('');
      setSecret(r.secret);
    },
  });
  const toggle = useAction((v: { id: string; disabled: boolean }) => ok(ws.api.webhooks.updateEndpoint({ params: { id: v.id }, body: { disabled: v.disabled } })), {
    success: (r) => `Endpoint ${r.status}.`,
  });
  const rotate = useAction((id: string) => ok(ws.api.webhooks.rotateSecret({ params: { id } })), {
    onDone: (r) => {
      setRotating(null);
      setSecret(r.secret);
    },
  });
  const test = useAction((id: string) => ok(ws.api.webhooks.sendTestEvent({ params: { id } })), { success: (r) => `Test event ${r.event_id} queued.` });
  return (
    <Stack>
      <Group justify="space-between">
        <Title order={2} fz="h4">
          Endpoints
        </Title>
        <Button onClick={() => { create.reset(); setCreating(true); }}>Add endpoint</Button>
      </Group>
      <ErrorLine error={toggle.error ?? test.error ?? rotate.error} />
      <Loaded q={endpoints}>
        {(list) => (
          <>
          <StackTable cols={['URL', 'Events', 'Status', 'Actions']} aria-label="Webhook endpoints">
              <Table.Tbody>
                {list.data.map((e) => (
                  <Table.Tr key={e.id} data-testid="endpoint-row">
                    <Table.Td style={{ wordBreak: 'break-all' }}>{e.url}</Table.Td>
                    <Table.Td>{e.enabled_events.join(', ')}</Table.Td>
                    <Table.Td>
                      <StatusBadge status={e.status} /> {e.disabled_reason === 'failing' ? '(failing)' : ''}
                    </Table.Td>
                    <Table.Td>
                      <Group gap="xs">
                        <Button size="xs" variant="default" onClick={() => toggle.mutate({ id: e.id, disabled: e.status !== 'disabled' })}>
                          {e.status === 'disabled' ? 'Enable' : 'Disable'}
                        </Button>
                        <Button size="xs" variant="default" onClick={() => setRotating(e.id)}>
                          Rotate secret
                        </Button>
                        <Button size="xs" variant="default" disabled={e.status === 'disabled'} onClick={() => test.mutate(e.id)}>
                          Send test event
                        </Button>
                      </Group>
                    </Table.Td>
                  </Table.Tr>
                ))}
              </Table.Tbody>
            </StackTable>
            {list.data.length === 0 && <Text c="dimmed">No endpoints yet.</Text>}
          </>
        )}
      </Loaded>
      <ModalForm opened={creating} onClose={() => setCreating(false)} title="Add a webhook endpoint" action={create} submitLabel="Add endpoint">
        <TextInput label="Endpoint URL" required placeholder="https://example.com/webhooks" value={url} onChange={(e) => setUrl(e.currentTarget.value)} />
        <MultiSelect label="Events" data={['*', ...EVENT_TYPES]} value={events} onChange={setEvents} />
      </ModalForm>
      <Confirm opened={rotating !== null} title="Rotate the signing secret?" confirmLabel="Rotate" busy={rotate.isPending} onClose={() => setRotating(null)} onConfirm={() => rotating && rotate.mutate(rotating)}>
        For 24 hours deliveries carry signatures from both the old and the new secret, so you can deploy the new one.
      </Confirm>
      <SecretOnce secret={secret} title="Signing secret" onClose={() => setSecret(null)} />
    </Stack>
  );
}

function Events() {
  const ws = useWorkspace();
  const pager = useCursor('events');
  const events = useQuery({ queryKey: ws.key('events', pager.cursor), queryFn: () => ok(ws.api.webhooks.listEvents({ query: { limit: 20, ...(pager.cursor ? { cursor: pager.cursor } : {}) } })) });
  return (
    <Stack>
      <Title order={2} fz="h4">
        Events
      </Title>
      <Loaded q={events}>
        {(page) => (
          <Stack>
            <StackTable cols={['Event', 'Type', 'Deliveries', 'Created']} aria-label="Events">
                <Table.Tbody>
                  {page.data.map((e) => (
                    <Table.Tr key={e.id} data-testid="event-row">
                      <Table.Td>
                        <RouterAnchor to={ws.to(`webhooks/events/${e.id}`)}>{e.id}</RouterAnchor>
                      </Table.Td>
                      <Table.Td>{e.type}</Table.Td>
                      <Table.Td>
                        <DeliveryStatus eventId={e.id} />
                      </Table.Td>
                      <Table.Td>{when(e.created)}</Table.Td>
                    </Table.Tr>
                  ))}
                </Table.Tbody>
              </StackTable>
            {page.data.length === 0 && <Text c="dimmed">No events yet.</Text>}
            <Pager page={pager.page} hasMore={page.has_more} nextCursor={page.next_cursor} onNext={pager.next} onPrev={pager.prev} />
          </Stack>
        )}
      </Loaded>
    </Stack>
  );
}

export function WebhooksPage() {
  return (
    <Page title="Webhooks">
      <Endpoints />
      <Events />
    </Page>
  );
}

export function EventPage() {
  const { eventId = '' } = useParams();
  const ws = useWorkspace();
  const event = useQuery({ queryKey: ws.key('event', eventId), queryFn: () => ok(ws.api.webhooks.getEvent({ params: { id: eventId } })) });
  const replay = useAction(() => ok(ws.api.webhooks.replayEvent({ params: { id: eventId } })), {
    success: (r) => (r.deliveries.length ? `Replay queued to ${r.deliveries.length} endpoint(s).` : 'No endpoint currently matches this event.'),
  });
  return (
    <Page
      title={`Event ${eventId}`}
      actions={
        <Button onClick={() => replay.mutate(undefined)} loading={replay.isPending}>
          Replay
        </Button>
      }
    >
      <ErrorLine error={replay.error} />
      <Loaded q={event}>
        {(e) => (
          <Stack>
            <Text>
              {e.type} · {when(e.created)}
            </Text>
            <Paper withBorder p="md">
              <Title order={2} fz="h5" mb="xs">
                Deliveries
              </Title>
              <EventAttempts eventId={e.id} />
            </Paper>
            <Paper withBorder p="md">
              <Title order={2} fz="h5" mb="xs">
                Payload
              </Title>
              <Code block>{JSON.stringify(e.data, null, 2)}</Code>
            </Paper>
          </Stack>
        )}
      </Loaded>
    </Page>
  );
}
