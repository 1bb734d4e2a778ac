import type { OrderEventObject, WebhookEvent, WebhookEventType } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { newId } from '../../lib/ids.js';
import { insertEvent } from './store.js';

/** An event as stored and delivered (the contract's WebhookEvent). */
export type EventEnvelope = WebhookEvent;

export type RecordEventInput = {
  projectId: string;
  merchantId: string | null;
  livemode: boolean;
  type: WebhookEventType;
  object: OrderEventObject;
  /** Defaults to the outbox's clock (services.now()). */
  now?: Date;
};

/** What runs in the business transaction after an event row is written (webhook fan-out). */
export type EventFanOut = (tx: Em, envelope: EventEnvelope, input: RecordEventInput) => Promise<void>;

/**
 * Transactional outbox, built once with the services: `record` is called with the
 * transaction's `em` of the business change, so the event and its fan-out (webhook
 * deliveries) exist exactly when the change commits. `created` is the injected clock's.
 */
export class EventOutbox {
  constructor(
    private readonly clock: () => Date,
    private readonly fanOut: readonly EventFanOut[],
  ) {}

  async record(tx: Em, input: RecordEventInput): Promise<EventEnvelope> {
    const now = input.now ?? this.clock();
    const envelope: EventEnvelope = {
      id: newId('evt'),
      type: input.type,
      created: Math.floor(now.getTime() / 1000),
      livemode: input.livemode,
      api_version: 'v1',
      data: { object: input.object },
    };
    await insertEvent(tx, {
      id: envelope.id,
      projectId: input.projectId,
      merchantId: input.merchantId,
      livemode: input.livemode,
      type: input.type,
      payload: JSON.stringify(envelope),
      createdAt: now,
    });
    for (const hook of this.fanOut) await hook(tx, envelope, input);
    return envelope;
  }
}
