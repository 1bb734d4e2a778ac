import type { EndpointTestWebhookEvent, OrderWebhookEvent, WebhookEvent } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { newId } from '../../lib/ids.js';
import { insertEvent } from './store.js';

/** An event as stored and delivered (the contract's WebhookEvent). */
export type EventEnvelope = WebhookEvent;

/** The type and its `data.object`, paired as the contract pairs them (an order event carries an order). */
export type EventBody =
  | { type: OrderWebhookEvent['type']; object: OrderWebhookEvent['data']['object'] }
  | { type: EndpointTestWebhookEvent['type']; object: EndpointTestWebhookEvent['data']['object'] };

export type RecordEventInput = EventBody & {
  projectId: string;
  merchantId: string | null;
  livemode: boolean;
  /** Defaults to the outbox's clock (services.now()). */
  now?: Date;
};

/** Keys in the documented order (the delivered bytes are this object's JSON). */
function envelopeOf(id: string, created: number, livemode: boolean, body: EventBody): EventEnvelope {
  return body.type === 'webhook_endpoint.test'
    ? { id, type: body.type, created, livemode, api_version: 'v1', data: { object: body.object } }
    : { id, type: body.type, created, livemode, api_version: 'v1', data: { object: body.object } };
}

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
    const envelope = envelopeOf(newId('evt'), Math.floor(now.getTime() / 1000), input.livemode, input);
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
