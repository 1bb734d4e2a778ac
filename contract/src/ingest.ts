import { z } from 'zod';
import { c, keyErrors, meta, serviceValidated } from './common.js';
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

/**
 * The self-hosted deployment's receipt as it sent it: a compact JWS (RFC 7515), three base64url
 * segments, a protected header that is a JSON object naming its `alg` (not `none`), a payload
 * that is a JSON object, and a signature. The service checks that shape (400 RECEIPT_MALFORMED
 * otherwise) and stores it; it does not verify the signature (it holds no key of the deployment's).
 */
export const IngestReceipt = z
  .string()
  .regex(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/)
  .describe('Compact JWS: base64url(JSON header with alg, not none).base64url(JSON object payload).base64url(signature). Checked for shape (400 RECEIPT_MALFORMED), not verified: the deployment signed it with its own key.');

const RepSummary = z
  .object({ agentId: z.string(), score: z.number().int(), tier: ReputationTier })
  .describe('The agent as this project sees it in the key\'s mode: the shared score plus what this project reported. A report never moves the score other projects read.');

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
    path: '/session',
    body: z.object({ session: IngestSession }).strict(),
    responses: { 200: z.object({ ok: z.literal(true), session_id: z.string(), persisted: z.boolean() }), 409: ErrorBody },
    summary: 'Upsert a self-hosted checkout session',
    metadata: ingestMeta('ingestSession'),
  },
  order: {
    method: 'POST',
    path: '/order',
    body: z
      .object({
        session: IngestSession,
        receipt: serviceValidated(IngestReceipt, z.string()),
        settlement: SettlementResult,
        fulfillment: z.unknown().optional(),
      })
      .strict(),
    responses: { 201: IngestOrderCreated, 409: ErrorBody },
    summary: 'Report an accepted, settled order (idempotent on session.id)',
    description:
      'One transaction: order and receipt rows (when anchored; the order says source: ingest), the reputation delta (at most once, counted only in this project\'s own view), order.accepted and order.settled. A receipt that is not a well-formed compact JWS is 400 RECEIPT_MALFORMED.',
    metadata: ingestMeta('ingestOrder'),
  },
  decision: {
    method: 'POST',
    path: '/decision',
    body: z.object({ session: IngestSession }).strict(),
    responses: {
      200: z.object({
        ok: z.literal(true),
        decision: Decision,
        event_ids: z.array(z.string()),
        reputation: RepSummary,
        replayed: z.literal(true).optional(),
      }),
      409: ErrorBody,
    },
    summary: 'Report a reject or hold decision (order.rejected / order.held)',
    metadata: ingestMeta('ingestDecision'),
  },
}, { pathPrefix: '/v1/ingest', commonResponses: keyErrors });
