import { z } from 'zod';
import { c, keyErrors, meta } from './common.js';
import { ErrorBody } from './errors.js';
import { Decision, MandateType } from './agent.js';
import { ReputationTier } from './policy.js';

/**
 * A self-hosted library's CheckoutSession: only `id` is required; known fields are typed,
 * anything else is kept. It anchors to a merchant when `merchantId` is an `mrch_` id of the
 * key's project and mode.
 */
export const IngestSession = z
  .object({
    id: z.string().min(1).max(200),
    merchantId: z.string().max(200).optional(),
    agentId: z.string().max(200).optional(),
    state: z.string().max(50).optional(),
    verdict: z
      .object({
        decision: Decision,
        tier: z.string().optional(),
        reasonCodes: z.array(z.string()).optional(),
      })
      .passthrough()
      .optional(),
    total: z
      .object({ currency: z.string(), subtotal: z.string(), tax: z.string(), total: z.string() })
      .passthrough()
      .optional(),
    lines: z.array(z.object({ sku: z.string(), qty: z.number().int() }).passthrough()).optional(),
    railName: z.string().max(50).optional(),
    mandate: z.object({ type: MandateType, ref: z.string().optional() }).passthrough().nullable().optional(),
    buyer: z.record(z.string(), z.unknown()).nullable().optional(),
  })
  .passthrough();
export type IngestSession = z.infer<typeof IngestSession>;

export const SettlementResult = z
  .object({ reference: z.string().min(1).max(200), rail: z.string().optional(), chain: z.string().optional() })
  .passthrough();

const RepSummary = z.object({ agentId: z.string(), score: z.number().int(), tier: ReputationTier });

export const IngestOrderCreated = z.object({
  order_id: z.string().nullable(),
  receipt_id: z.string().nullable(),
  event_ids: z.array(z.string()),
  reputation: RepSummary.optional(),
  replayed: z.literal(true).optional(),
  reputation_score: z.number().int().optional(),
});

const ingestMeta = (operationId: string) => meta({ auth: 'key', scopes: ['ingest:write'], tag: 'Ingest', operationId });

export const ingestContract = c.router({
  session: {
    method: 'POST',
    path: '/v1/ingest/session',
    body: z.object({ session: IngestSession }).strict(),
    responses: { 200: z.object({ ok: z.literal(true), session_id: z.string(), persisted: z.boolean() }), ...keyErrors, 409: ErrorBody },
    summary: 'Upsert a self-hosted checkout session',
    metadata: ingestMeta('ingestSession'),
  },
  order: {
    method: 'POST',
    path: '/v1/ingest/order',
    body: z
      .object({
        session: IngestSession,
        receipt: z.string().regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+$/, 'must be a compact JWS'),
        settlement: SettlementResult,
        fulfillment: z.unknown().optional(),
      })
      .strict(),
    responses: { 201: IngestOrderCreated, ...keyErrors, 409: ErrorBody },
    summary: 'Report an accepted, settled order (idempotent on session.id)',
    description: 'One transaction: order and receipt rows (when anchored), the reputation delta (at most once), order.accepted and order.settled.',
    metadata: ingestMeta('ingestOrder'),
  },
  decision: {
    method: 'POST',
    path: '/v1/ingest/decision',
    body: z.object({ session: IngestSession }).strict(),
    responses: {
      200: z.object({
        ok: z.literal(true),
        decision: Decision,
        event_ids: z.array(z.string()),
        reputation: RepSummary,
        replayed: z.literal(true).optional(),
      }),
      ...keyErrors,
      409: ErrorBody,
    },
    summary: 'Report a reject or hold decision (order.rejected / order.held)',
    metadata: ingestMeta('ingestDecision'),
  },
});
