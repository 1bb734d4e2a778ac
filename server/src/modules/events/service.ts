import { unixSeconds } from '../../lib/time.js';
import { RefundEventObject, type EndpointTestWebhookEvent, type OrderEventObject, type OrderWebhookEvent, type RefundWebhookEvent, type WebhookEvent } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { newId } from '../../lib/ids.js';
import { insertEvents, type NewEventRow } from './store.js';

/** An event as stored and delivered (the contract's WebhookEvent). */
export type EventEnvelope = WebhookEvent;

/** The type and its `data.object`, paired as the contract pairs them (an order event carries an order). */
export type EventBody =
  | { type: OrderWebhookEvent['type']; object: OrderWebhookEvent['data']['object'] }
  | { type: RefundWebhookEvent['type']; object: RefundWebhookEvent['data']['object'] }
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
  if (body.type === 'webhook_endpoint.test') return { id, type: body.type, created, livemode, api_version: 'v1', data: { object: body.object } };
  if (isRefundBody(body)) return { id, type: body.type, created, livemode, api_version: 'v1', data: { object: body.object } };
  return { id, type: body.type, created, livemode, api_version: 'v1', data: { object: body.object } };
}

function isRefundBody(body: EventBody): body is Extract<EventBody, { type: RefundWebhookEvent['type'] }> {
  return body.type === 'refund.created' || body.type === 'refund.succeeded' || body.type === 'refund.failed';
}

function isRefundEvent(e: EventEnvelope): e is RefundWebhookEvent {
  return e.type === 'refund.created' || e.type === 'refund.succeeded' || e.type === 'refund.failed';
}

/**
 * The fan-out of recorded events (webhook deliveries), run in the statement that writes them:
 * `ctes` are SQL over the events being written (see events/store.ts `insertEvents`), and
 * `onFanned` learns what was enqueued, in the business transaction.
 */
export type EventFanOut = { ctes: string; onFanned: (targets: Array<{ eventId: string; endpointId: string }>) => void };

/**
 * An order event object read back from `events.payload` (jsonb, which reorders keys) in the key
 * order its presenter writes: the orders module's `reorderOrderEventObject`, passed in by boot.ts
 * (orders records events, so importing it from here would close a cycle).
 */
export type OrderObjectInKeyOrder = (o: OrderEventObject) => OrderEventObject;

/**
 * Transactional outbox, built once with the services: `record` is called with the
 * transaction's `em` of the business change, so the events and their fan-out (webhook
 * deliveries) exist exactly when the change commits. `created` is the injected clock's.
 * Events recorded together (`recordMany`) and their fan-out are one statement.
 */
export class EventOutbox {
  constructor(
    private readonly clock: () => Date,
    private readonly fanOut: EventFanOut | null,
    private readonly orderObjectInKeyOrder: OrderObjectInKeyOrder,
  ) {}

  /**
   * The exact bytes of a stored event, in the documented key order (the payload column is jsonb,
   * which reorders keys): what a replay freezes for an event that has no stored bytes.
   */
  bytesOfStoredEvent(e: EventEnvelope): string {
    // A refund object's documented key order is its schema's: parsing rebuilds it in that order.
    const body: EventBody =
      e.type === 'webhook_endpoint.test'
        ? { type: e.type, object: { id: e.data.object.id, object: e.data.object.object, url: e.data.object.url } }
        : isRefundEvent(e)
          ? { type: e.type, object: RefundEventObject.parse(e.data.object) }
          : { type: e.type, object: this.orderObjectInKeyOrder(e.data.object) };
    return JSON.stringify(envelopeOf(e.id, e.created, e.livemode, body));
  }

  async record(tx: Em, input: RecordEventInput): Promise<EventEnvelope> {
    return (await this.recordMany(tx, [input]))[0]!;
  }

  async recordMany(tx: Em, inputs: RecordEventInput[]): Promise<EventEnvelope[]> {
    const { rows, envelopes } = this.prepare(inputs);
    const fanned = await insertEvents(tx, rows, this.fanOutCtes);
    this.fanned(fanned);
    return envelopes;
  }

  /** The rows and envelopes of events about to be recorded, for a statement that writes them with other rows (`eventCtes`). */
  prepare(inputs: RecordEventInput[]): { rows: NewEventRow[]; envelopes: EventEnvelope[] } {
    const made = inputs.map((input) => {
      const now = input.now ?? this.clock();
      return { input, now, envelope: envelopeOf(newId('evt'), unixSeconds(now), input.livemode, input) };
    });
    return {
      rows: made.map(({ input, now, envelope }) => ({
        id: envelope.id,
        projectId: input.projectId,
        merchantId: input.merchantId,
        livemode: input.livemode,
        type: input.type,
        body: JSON.stringify(envelope),
        createdAt: now,
        onlyEndpoint: input.type === 'webhook_endpoint.test' ? input.object.id : null,
      })),
      envelopes: made.map((e) => e.envelope),
    };
  }

  /** The fan-out's CTEs for `eventCtes`, or null without one. */
  get fanOutCtes(): string | null {
    return this.fanOut?.ctes ?? null;
  }

  /** What the fan-out enqueued (the `fanned` rows of the statement that wrote the events). */
  fanned(rows: Array<{ event_id: string; endpoint_id: string }>): void {
    this.fanOut?.onFanned(rows.map((r) => ({ eventId: r.event_id, endpointId: r.endpoint_id })));
  }
}
