import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, listEnvelope, ListQuery, meta, idRef, prefixedId } from './common.js';
import { ErrorBody } from './errors.js';
import { OrderEventObject } from './orders.js';
import { RefundEventObject } from './refunds.js';

/** The order events of section 6: what an endpoint subscribes to; `*` in `enabled_events` is all of them. */
export const ORDER_EVENT_TYPES = ['order.accepted', 'order.settled', 'order.rejected', 'order.held'] as const;
export const OrderEventType = z.enum(ORDER_EVENT_TYPES);
export type OrderEventType = z.infer<typeof OrderEventType>;

/** The refund events (docs/settlement.md "Refunds"): `data.object` is the refund. */
export const REFUND_EVENT_TYPES = ['refund.created', 'refund.succeeded', 'refund.failed'] as const;
export const RefundEventType = z.enum(REFUND_EVENT_TYPES);
export type RefundEventType = z.infer<typeof RefundEventType>;

/** What an endpoint can subscribe to in `enabled_events` (besides `*`). */
export const SUBSCRIBABLE_EVENT_TYPES = [...ORDER_EVENT_TYPES, ...REFUND_EVENT_TYPES] as const;

/**
 * The test event `POST /v1/webhooks/endpoints/{id}/test` sends to that one endpoint: not an
 * order event, so a receiver that fulfils on `order.*` can never act on it (docs/decisions.md).
 * Nobody subscribes to it; it goes to the endpoint tested, whatever its `enabled_events`.
 */
export const ENDPOINT_TEST_EVENT_TYPE = 'webhook_endpoint.test' as const;

/** Every event type recorded and listed by `GET /v1/events`. */
export const EVENT_TYPES = [...ORDER_EVENT_TYPES, ...REFUND_EVENT_TYPES, ENDPOINT_TEST_EVENT_TYPE] as const;
export const WebhookEventType = z.enum(EVENT_TYPES);
export type WebhookEventType = z.infer<typeof WebhookEventType>;

/**
 * When each delivery attempt of an event is sent, in milliseconds after the event was recorded
 * (attempt 1 at once): the one schedule the delivery worker runs and the document and docs state.
 * `SVC_WEBHOOK_RETRY_SCALE` multiplies it (tests and demos).
 */
export const WEBHOOK_RETRY_SCHEDULE_MS = [0, 30_000, 120_000, 600_000, 3_600_000, 21_600_000, 86_400_000] as const;

export const EnabledEvents = z
  .array(z.union([OrderEventType, RefundEventType, z.literal('*')]))
  .min(1)
  .max(SUBSCRIBABLE_EVENT_TYPES.length + 1)
  .refine((list) => new Set(list).size === list.length, 'must not repeat an event type')
  .refine((list) => !list.includes('*') || list.length === 1, '"*" must be the only entry when present')
  .describe('Order and refund event types to deliver, or ["*"] for all of them (webhook_endpoint.test is sent only on request, to the endpoint tested).');

/** Only shape and length here: the server answers WEBHOOK_URL_INVALID with the precise rule. */
const WebhookUrl = z.string().trim().min(1).max(2048).describe('https URL (test mode also allows http to a loopback address).');

export const WebhookEndpointStatus = z.enum(['pending', 'enabled', 'disabled']);
export type WebhookEndpointStatus = z.infer<typeof WebhookEndpointStatus>;

export const WebhookEndpoint = z.object({
  id: prefixedId('whk'),
  url: z.string(),
  enabled_events: z.array(z.string()),
  status: WebhookEndpointStatus.describe('pending until the first 2xx, then enabled; disabled by PATCH or after 5 days of only failures.'),
  disabled_reason: z.enum(['manual', 'failing']).nullable().describe('Why the endpoint is disabled; null unless status is disabled.'),
  description: z.string().nullable(),
  livemode: z.boolean(),
  previous_secret_expires_at: IsoTimestamp.nullable().describe('While set, deliveries are also signed with the secret replaced by the last rotation.'),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
});
export type WebhookEndpoint = z.infer<typeof WebhookEndpoint>;

/** Returned by create and rotate-secret only: the one time the secret is shown. */
export const WebhookEndpointWithSecret = WebhookEndpoint.extend({
  secret: z.string().regex(/^whsec_/).describe('Signing secret; shown once.'),
});
export type WebhookEndpointWithSecret = z.infer<typeof WebhookEndpointWithSecret>;

export const CreateWebhookEndpointBody = z
  .object({
    url: WebhookUrl,
    enabled_events: EnabledEvents,
    description: z.string().trim().max(500).optional(),
  })
  .strict();
export type CreateWebhookEndpointBody = z.infer<typeof CreateWebhookEndpointBody>;

export const UpdateWebhookEndpointBody = z
  .object({
    url: WebhookUrl.optional(),
    enabled_events: EnabledEvents.optional(),
    description: z.string().trim().max(500).nullable().optional(),
    disabled: z
      .boolean()
      .optional()
      .describe('true disables the endpoint (no deliveries; pending ones are canceled); false re-enables it.'),
  })
  .strict();
export type UpdateWebhookEndpointBody = z.infer<typeof UpdateWebhookEndpointBody>;

/** `data.object` of a `webhook_endpoint.test` event: the endpoint it was sent to. */
export const WebhookEndpointTestObject = z.object({
  id: prefixedId('whk').describe('The endpoint tested.'),
  object: z.literal('webhook_endpoint'),
  url: z.string().describe('The endpoint\'s URL when the test was sent.'),
});
export type WebhookEndpointTestObject = z.infer<typeof WebhookEndpointTestObject>;

const envelope = {
  id: prefixedId('evt'),
  created: z.number().int().describe('Unix seconds.'),
  livemode: z.boolean(),
  api_version: z.literal('v1'),
};

export const OrderWebhookEvent = z.object({ ...envelope, type: OrderEventType, data: z.object({ object: OrderEventObject }) });
export type OrderWebhookEvent = z.infer<typeof OrderWebhookEvent>;

/** One member per refund event type, so `event.type === 'refund.created' || …` narrows a WebhookEvent. */
const refundEvent = <T extends RefundEventType>(type: T) => z.object({ ...envelope, type: z.literal(type), data: z.object({ object: RefundEventObject }) });
export const RefundWebhookEvent = z.union([refundEvent('refund.created'), refundEvent('refund.succeeded'), refundEvent('refund.failed')]);
export type RefundWebhookEvent = z.infer<typeof RefundWebhookEvent>;

export const EndpointTestWebhookEvent = z.object({
  ...envelope,
  type: z.literal(ENDPOINT_TEST_EVENT_TYPE),
  data: z.object({ object: WebhookEndpointTestObject }),
});
export type EndpointTestWebhookEvent = z.infer<typeof EndpointTestWebhookEvent>;

/** An event as recorded and delivered: narrow on `type` to type `data.object`. */
export const WebhookEvent = z.union([OrderWebhookEvent, RefundWebhookEvent, EndpointTestWebhookEvent]);
export type WebhookEvent = z.infer<typeof WebhookEvent>;

export const WebhookAttempt = z.object({
  id: prefixedId('wha').describe('Sent as Svc-Delivery-Id.'),
  attempt_number: z.number().int().min(1).max(7),
  status: z
    .enum(['in_progress', 'succeeded', 'failed', 'lost'])
    .describe('lost: the worker stopped before recording a result; the attempt was sent again after its lease expired.'),
  response_status: z.number().int().nullable(),
  duration_ms: z.number().int().nullable(),
  error: z.string().nullable(),
  created_at: IsoTimestamp,
  completed_at: IsoTimestamp.nullable(),
});

export const WebhookDelivery = z.object({
  endpoint_id: prefixedId('whk'),
  status: z.enum(['pending', 'succeeded', 'failed', 'canceled']).describe('failed is permanent (seven failed attempts); canceled: the endpoint was disabled or deleted.'),
  replay: z.boolean().describe('true when enqueued by POST /v1/events/{id}/replay.'),
  attempt_count: z.number().int(),
  next_attempt_at: IsoTimestamp.nullable(),
  created_at: IsoTimestamp,
  attempts: z.array(WebhookAttempt),
});

const withDeliveries = { deliveries: z.array(WebhookDelivery) };
export const WebhookEventDetail = z.union([
  OrderWebhookEvent.extend(withDeliveries),
  RefundWebhookEvent.options[0].extend(withDeliveries),
  RefundWebhookEvent.options[1].extend(withDeliveries),
  RefundWebhookEvent.options[2].extend(withDeliveries),
  EndpointTestWebhookEvent.extend(withDeliveries),
]);

export const ReplayResult = z.object({
  event_id: prefixedId('evt'),
  deliveries: z.array(z.object({ endpoint_id: prefixedId('whk'), status: z.literal('pending') })),
});

const EndpointParams = z.object({ id: idRef('whk') });
const EventParams = z.object({ id: idRef('evt') });
const writeMeta = (operationId: string) => meta({ auth: 'key', scopes: ['webhooks:write'], tag: 'Webhooks', operationId });
const readMeta = (operationId: string) => meta({ auth: 'key', scopes: ['webhooks:read'], tag: 'Webhooks', operationId });

const endpointRoutes = c.router({
  createEndpoint: {
    method: 'POST',
    path: '',
    body: CreateWebhookEndpointBody,
    responses: { 201: WebhookEndpointWithSecret, 422: ErrorBody },
    summary: 'Register a webhook endpoint',
    description:
      'Scoped to the key\'s project and mode. The response carries the whsec_ signing secret, shown this once. Status starts pending and becomes enabled on the first 2xx.',
    metadata: writeMeta('createWebhookEndpoint'),
  },
  listEndpoints: {
    method: 'GET',
    path: '',
    query: ListQuery(20),
    responses: { 200: listEnvelope(WebhookEndpoint) },
    summary: 'List webhook endpoints, newest first',
    metadata: readMeta('listWebhookEndpoints'),
  },
  getEndpoint: {
    method: 'GET',
    path: '/:id',
    pathParams: EndpointParams,
    responses: { 200: WebhookEndpoint },
    summary: 'Retrieve a webhook endpoint',
    metadata: readMeta('getWebhookEndpoint'),
  },
  updateEndpoint: {
    method: 'PATCH',
    path: '/:id',
    pathParams: EndpointParams,
    body: UpdateWebhookEndpointBody,
    responses: { 200: WebhookEndpoint },
    summary: 'Update a webhook endpoint; only present fields change',
    description: 'disabled: true stops deliveries; disabled: false re-enables (enabled if it ever succeeded, else pending). A new url resets an active endpoint to pending.',
    metadata: writeMeta('updateWebhookEndpoint'),
  },
  deleteEndpoint: {
    method: 'DELETE',
    path: '/:id',
    pathParams: EndpointParams,
    body: c.noBody(),
    responses: { 204: c.noBody() },
    summary: 'Delete a webhook endpoint; its pending deliveries are canceled',
    metadata: writeMeta('deleteWebhookEndpoint'),
  },
  rotateSecret: {
    method: 'POST',
    path: '/:id/rotate-secret',
    pathParams: EndpointParams,
    body: c.noBody(),
    responses: { 200: WebhookEndpointWithSecret },
    summary: 'Roll the signing secret',
    description: 'Returns the new secret once. For 24 h deliveries carry two v1 signatures, one per secret.',
    metadata: writeMeta('rotateWebhookSecret'),
  },
  sendTestEvent: {
    method: 'POST',
    path: '/:id/test',
    pathParams: EndpointParams,
    body: c.noBody(),
    responses: { 200: ReplayResult, 409: ErrorBody },
    summary: 'Send a test event to this endpoint only',
    description:
      'Records a webhook_endpoint.test event (data.object: {id, object: "webhook_endpoint", url}) and queues one signed delivery to this endpoint, whatever its enabled_events, through the normal queue and retries. Never an order event and never sent to another endpoint; it is listed by GET /v1/events. A disabled endpoint is 409 WEBHOOK_ENDPOINT_DISABLED.',
    metadata: writeMeta('sendWebhookTestEvent'),
  },
}, { pathPrefix: '/v1/webhooks/endpoints', commonResponses: keyErrors });

const eventRoutes = c.router({
  listEvents: {
    method: 'GET',
    path: '',
    query: ListQuery(20)
      .extend({
        type: WebhookEventType.optional(),
        order_id: prefixedId('ord').optional().describe('Only the events of this order: its order.* events (data.object.id) and its refunds\' refund.* events (data.object.order_id).'),
      })
      .strict(),
    responses: { 200: listEnvelope(WebhookEvent) },
    summary: 'List events, newest first',
    description: 'Every event of the key\'s project and mode, whether or not an endpoint received it. Filters combine.',
    metadata: readMeta('listEvents'),
  },
  getEvent: {
    method: 'GET',
    path: '/:id',
    pathParams: EventParams,
    responses: { 200: WebhookEventDetail },
    summary: 'Retrieve an event with its deliveries and their attempts',
    metadata: readMeta('getEvent'),
  },
  replayEvent: {
    method: 'POST',
    path: '/:id/replay',
    pathParams: EventParams,
    body: c.noBody(),
    responses: { 200: ReplayResult },
    summary: 'Deliver an event again',
    description:
      'Enqueues a new delivery of the same bytes to every endpoint that currently matches it (not disabled, same mode, enabled_events matches). A webhook_endpoint.test event goes again to the endpoint it tested only.',
    metadata: writeMeta('replayEvent'),
  },
}, { pathPrefix: '/v1/events', commonResponses: keyErrors });

/** Webhook endpoints and the events they are sent. */
export const webhooksContract = { ...endpointRoutes, ...eventRoutes };
