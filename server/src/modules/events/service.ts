import type { Em } from '../../db/orm.js';
import { newId } from '../../lib/ids.js';

export type EventType = 'order.accepted' | 'order.settled' | 'order.rejected' | 'order.held';

export type EventEnvelope = {
  id: string;
  type: EventType;
  created: number;
  livemode: boolean;
  api_version: 'v1';
  data: { object: Record<string, unknown> };
};

export type RecordEventInput = {
  projectId: string;
  merchantId: string | null;
  livemode: boolean;
  type: EventType;
  object: Record<string, unknown>;
  now?: Date;
};

/**
 * Transactional outbox: called with the transaction's `em` of the business change, so the
 * event exists exactly when the change commits. Delivery fan-out hooks in here.
 */
export async function recordEvent(tx: Em, input: RecordEventInput): Promise<EventEnvelope> {
  const now = input.now ?? new Date();
  const envelope: EventEnvelope = {
    id: newId('evt'),
    type: input.type,
    created: Math.floor(now.getTime() / 1000),
    livemode: input.livemode,
    api_version: 'v1',
    data: { object: input.object },
  };
  await tx.execute('insert into events (id, project_id, merchant_id, livemode, type, payload, created_at) values (?, ?, ?, ?, ?, ?, ?)', [
    envelope.id,
    input.projectId,
    input.merchantId,
    input.livemode,
    input.type,
    JSON.stringify(envelope),
    now,
  ]);
  await afterEventRecorded(tx, envelope, input);
  return envelope;
}

/** Delivery fan-out (webhooks module) plugs in here; it must use `tx` so it commits with the event. */
export type EventHook = (tx: Em, envelope: EventEnvelope, input: RecordEventInput) => Promise<void>;
const hooks: EventHook[] = [];
export function onEventRecorded(hook: EventHook) {
  hooks.push(hook);
}
async function afterEventRecorded(tx: Em, envelope: EventEnvelope, input: RecordEventInput) {
  for (const hook of hooks) await hook(tx, envelope, input);
}
