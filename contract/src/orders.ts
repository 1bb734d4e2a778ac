import { z } from 'zod';
import { c, IsoTimestamp, IsoTimestampQuery, keyErrors, listEnvelope, ListQuery, meta, idRef, TimeZoneName } from './common.js';
import { ErrorBody } from './errors.js';
import { Decision, MandateType, SessionView, SettleAccepted, Total } from './agent.js';
import { TrustTier } from './policy.js';
import { RefundStatusOfOrder } from './refunds.js';

/**
 * Where an order came from. `hosted`: this service ran the gate and settled the payment itself
 * (its receipt verifies against the merchant's JWKS). `ingest`: reported through `/v1/ingest/*`
 * by a self-hosted checkout with an `ingest:write` key; the service verified neither the payment
 * nor the receipt. Fulfil a paid order only when it is `hosted` (docs/webhooks.md, "Fulfilling an order").
 */
export const OrderSource = z
  .enum(['hosted', 'ingest'])
  .describe('hosted: gated and settled by this service; ingest: reported by a self-hosted checkout through /v1/ingest (payment and receipt not verified by this service).');
export type OrderSource = z.infer<typeof OrderSource>;

export const Order = z.object({
  id: z.string(),
  source: OrderSource,
  session_id: z.string(),
  merchant_id: z.string(),
  agent_id: z.string(),
  decision: Decision,
  total: Total.nullable(),
  rail_name: z.string(),
  settlement_ref: z.string().optional(),
  receipt_id: z.string().optional(),
  mandate_type: MandateType,
  trust_tier: TrustTier,
  livemode: z.boolean(),
  amount_refunded: z.string().describe('Exact decimal string in the order\'s currency: the sum of its succeeded refunds ("0.00" when none).'),
  refund_status: RefundStatusOfOrder.describe('none, partial, or full (the succeeded refunds reach the order total).'),
  created_at: IsoTimestamp,
});
export type Order = z.infer<typeof Order>;

/**
 * The order object of an event's `data.object` (interface section 6): the order without its
 * decision, mode and time (the envelope says them), plus what fulfillment needs. `order.rejected`
 * and `order.held` carry it without `settlement_ref` and `receipt_id`.
 */
export const OrderEventObject = Order.pick({
  id: true,
  source: true,
  session_id: true,
  merchant_id: true,
  agent_id: true,
  total: true,
  rail_name: true,
  settlement_ref: true,
  receipt_id: true,
  mandate_type: true,
  trust_tier: true,
}).extend({
  items: z.array(z.object({ sku: z.string(), qty: z.number().int() })),
  mandate_ref: z.string().nullable().describe('Links the order to the buyer\'s authorization.'),
  buyer: z
    .record(z.string(), z.unknown())
    .optional()
    .describe('Present when checkout captured buyer details: name and shipping_address {line1, city, postal_code, country}; as reported for ingested orders.'),
});
export type OrderEventObject = z.infer<typeof OrderEventObject>;

const SessionParams = z.object({ id: idRef('sess') });

/** The filters the feed and its CSV export share: every filter narrows, and they combine (all must hold). */
const OrderFilters = z.object({
    merchant_id: idRef('mrch').optional(),
    q: z
      .string()
      .trim()
      .min(1)
      .max(200)
      .optional()
      .describe('Search: the orders whose id (ord_…), session id (sess_…) or agent id is exactly this (agent ids compare case-insensitively).'),
    decision: Decision.optional().describe('Only orders with this decision (a held order that was approved reads accept).'),
    agent_id: z.string().min(1).max(200).optional().describe('Only orders of this agent.'),
    trust_tier: TrustTier.optional().describe('Only orders decided at this trust tier.'),
    created_gte: IsoTimestampQuery.optional().describe('Only orders created at or after this time (ISO 8601 with Z or an offset; send + as %2B).'),
    created_lt: IsoTimestampQuery.optional().describe('Only orders created before this time.'),
});

/** The order feed's query: the filters, one page of them. */
export const OrderListQuery = ListQuery(50).extend(OrderFilters.shape).strict();
export type OrderListQuery = z.infer<typeof OrderListQuery>;

/** The CSV export's query: the feed's filters, every matching order (no pages). */
export const OrderExportQuery = OrderFilters.strict();
export type OrderExportQuery = z.infer<typeof OrderExportQuery>;

/** The CSV export's columns, in order (docs/management-api.md, "Exporting orders"). */
export const ORDER_EXPORT_COLUMNS = [
  'id',
  'created_at',
  'merchant_id',
  'session_id',
  'agent_id',
  'decision',
  'trust_tier',
  'source',
  'currency',
  'subtotal',
  'tax',
  'total',
  'amount_refunded',
  'refund_status',
  'rail_name',
  'settlement_ref',
  'receipt_id',
  'mandate_type',
] as const;

/** An exact decimal string of any size (a sum of money): never a JSON number. */
const DecimalSum = z.string().regex(/^\d+\.\d+$/, 'must be a decimal string like "12.50"').describe('Exact decimal string, at least two decimals.');
const Count = z.number().int().nonnegative();

export const OrdersSummaryPeriod = z.object({
  accepted_volume: DecimalSum.describe('Sum of the totals of accepted orders priced in USD (settled 1:1 in USDC), exact.'),
  accepted_count: Count.describe('Accepted orders, whatever their currency.'),
  orders_by_decision: z.object({ accept: Count, reject: Count, hold: Count }).describe('Orders created in the period by their current decision.'),
});

export const OrdersSummaryDay = z.object({
  date: z.string().regex(/^\d{4}-\d{2}-\d{2}$/).describe('The calendar day in the requested time zone, YYYY-MM-DD.'),
  accepted_volume: DecimalSum,
  accepted_count: Count,
});

export const OrdersSummary = z.object({
  currency: z.literal('USDC'),
  today: OrdersSummaryPeriod.describe('Since midnight today in `tz`.'),
  week: OrdersSummaryPeriod.describe('The last 7 calendar days in `tz`, today included.'),
  days: z.array(OrdersSummaryDay).describe('The last 14 calendar days in `tz`, oldest first, today last; days without orders read zero.'),
  holds_waiting: Count.describe('Checkout sessions held for review now (approve or decline them).'),
  failing_endpoints: Count.describe('Webhook endpoints of the project and mode whose latest finished delivery attempt failed, or that have a permanently failed delivery.'),
});
export type OrdersSummary = z.infer<typeof OrdersSummary>;

export const ordersContract = c.router({
  // Declared before any /v1/orders/:id route could be, so "summary" is never read as an id.
  summary: {
    method: 'GET',
    path: '/summary',
    query: z.object({ merchant_id: idRef('mrch').optional(), tz: TimeZoneName.optional().describe('IANA time zone name for the day boundaries, e.g. Europe/Paris; default UTC.') }).strict(),
    responses: { 200: OrdersSummary },
    summary: 'Sales at a glance: today, the last 7 and 14 days, holds waiting, failing webhook endpoints',
    description:
      'Scoped to the key\'s project and mode (and to one merchant with merchant_id; failing_endpoints is always the whole project\'s, endpoints belong to the project). Days are calendar days in tz. Volumes are exact decimal strings summed by the database.',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'getOrdersSummary' }),
  },
  // Declared before any /v1/orders/:id route could be, like summary.
  export: {
    method: 'GET',
    path: '/export.csv',
    query: OrderExportQuery,
    responses: {
      200: c.otherResponse({
        contentType: 'text/csv',
        body: z
          .string()
          .describe(
            `RFC 4180 CSV, UTF-8, a header row then one row per order, newest first, columns ${ORDER_EXPORT_COLUMNS.join(', ')}. Money is the exact decimal string; a cell starting with =, +, -, @, tab or carriage return is prefixed with an apostrophe so a spreadsheet never runs it as a formula.`,
          ),
      }),
    },
    summary: 'Export the order feed as CSV',
    description:
      'Every order of the key\'s project and mode matching the filters (the feed\'s filters, without pages), streamed newest first. Send created_gte and created_lt for a date range. Content-Disposition names a file orders-<mode>.csv.',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'exportOrdersCsv' }),
  },
  list: {
    method: 'GET',
    path: '',
    query: OrderListQuery,
    responses: { 200: listEnvelope(Order) },
    summary: 'The order feed, newest first',
    description: 'Filters combine. next_cursor continues the same filtered feed: send it with the same filters.',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'listOrders' }),
  },
}, { pathPrefix: '/v1/orders', commonResponses: keyErrors });

export const sessionsContract = c.router({
  get: {
    method: 'GET',
    path: '/:id',
    pathParams: SessionParams,
    responses: { 200: SessionView },
    summary: 'Read a checkout session (the hosted review of a held session)',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'getSession' }),
  },
  approve: {
    method: 'POST',
    path: '/:id/approve',
    pathParams: SessionParams,
    body: c.noBody(),
    responses: {
      200: SettleAccepted,
      202: z
        .object({
          status: z.enum(['settlement_pending', 'awaiting_reauthorization']),
          session_id: z.string(),
          order_id: z.string().nullable(),
          reason_codes: z.array(z.string()),
          error_human: z.string(),
        })
        .describe('settlement_pending: the transfer is sent, the order follows when it confirms; awaiting_reauthorization: the held authorization expired, the agent is asked to sign a fresh one (the gate does not hold it again).'),
      402: ErrorBody,
      409: ErrorBody,
    },
    summary: 'Approve a held session: runs capture and issues the receipt',
    metadata: meta({ auth: 'key', scopes: ['orders:write'], tag: 'Orders', operationId: 'approveSession' }),
  },
  decline: {
    method: 'POST',
    path: '/:id/decline',
    pathParams: SessionParams,
    body: c.noBody(),
    responses: { 200: z.object({ status: z.literal('rejected'), session_id: z.string(), order_id: z.string().nullable() }), 409: ErrorBody },
    summary: 'Decline a held session',
    metadata: meta({ auth: 'key', scopes: ['orders:write'], tag: 'Orders', operationId: 'declineSession' }),
  },
}, { pathPrefix: '/v1/sessions', commonResponses: keyErrors });
