import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, listEnvelope, ListQuery, meta, idRef, prefixedId } from './common.js';
import { ErrorBody } from './errors.js';
import { Decision, MandateType, SessionView, SettleAccepted, Total } from './agent.js';
import { TrustTier } from './policy.js';

export const Order = z.object({
  id: z.string(),
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

export const ordersContract = c.router({
  list: {
    method: 'GET',
    path: '/v1/orders',
    query: ListQuery(50).extend({ merchant_id: idRef('mrch').optional() }).strict(),
    responses: { 200: listEnvelope(Order), ...keyErrors },
    summary: 'The order feed, newest first',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'listOrders' }),
  },
});

export const sessionsContract = c.router({
  get: {
    method: 'GET',
    path: '/v1/sessions/:id',
    pathParams: SessionParams,
    responses: { 200: SessionView, ...keyErrors },
    summary: 'Read a checkout session (the hosted review of a held session)',
    metadata: meta({ auth: 'key', scopes: ['orders:read'], tag: 'Orders', operationId: 'getSession' }),
  },
  approve: {
    method: 'POST',
    path: '/v1/sessions/:id/approve',
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
      ...keyErrors,
      402: ErrorBody,
      409: ErrorBody,
      503: ErrorBody,
    },
    summary: 'Approve a held session: runs capture and issues the receipt',
    metadata: meta({ auth: 'key', scopes: ['orders:write'], tag: 'Orders', operationId: 'approveSession' }),
  },
  decline: {
    method: 'POST',
    path: '/v1/sessions/:id/decline',
    pathParams: SessionParams,
    body: c.noBody(),
    responses: { 200: z.object({ status: z.literal('rejected'), session_id: z.string(), order_id: z.string().nullable() }), ...keyErrors, 409: ErrorBody },
    summary: 'Decline a held session',
    metadata: meta({ auth: 'key', scopes: ['orders:write'], tag: 'Orders', operationId: 'declineSession' }),
  },
});
