import { decodeJwt, decodeProtectedHeader } from 'jose';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { DecimalString, IngestReceipt, TrustTier, type Decision, type IngestSession, type Total } from '@svc/contract';
import { respondIn, type AuthContext, type AuthedCtx as Authed } from '../../http/context.js';
import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { findProjectMerchant } from '../merchants/index.js';
import type { MerchantRow } from '../merchants/index.js';
import { addOrder, addReceipt, orderOfSession, orderRow, presentOrderEvent, receiptRow } from '../orders/index.js';
import { applyReportedOutcome, projectView, readReputation } from '../reputation/index.js';
import { claimIngestReport, findIngestReport, sessionIdTakenElsewhere, setIngestReportOrder, upsertIngestedSession } from './store.js';

/** The merchant a self-hosted session anchors to: an `mrch_` id of the key's project and mode. */
async function anchor(em: Em, auth: AuthContext, merchantId: string | undefined): Promise<MerchantRow | null> {
  if (!merchantId || !hasPrefix(merchantId, 'mrch')) return null;
  return findProjectMerchant(em, { id: merchantId, projectId: auth.projectId, livemode: auth.livemode });
}

function requireAgent(session: IngestSession): string {
  if (!session.agentId) throw new ApiError('VALIDATION_FAILED', 'body.session.agentId: is required (it anchors reputation).');
  return session.agentId;
}

/** The contract's decimal-string rule for money. */
const isDecimal = (v: unknown) => DecimalString.safeParse(v).success;
function totalOf(session: IngestSession): Total | null {
  const t = session.total;
  if (!t || !isDecimal(t.subtotal) || !isDecimal(t.tax) || !isDecimal(t.total)) return null;
  return { currency: t.currency.toUpperCase(), subtotal: t.subtotal, tax: t.tax, total: t.total };
}

function newIngestOrder(tx: Em, now: Date, m: MerchantRow, session: IngestSession, agentId: string, decision: Decision, rail: string) {
  const tier = TrustTier.safeParse(session.verdict?.tier);
  return addOrder(
    tx,
    orderRow({
      sessionId: session.id,
      merchant: m,
      agentId,
      decision,
      total: totalOf(session),
      items: (session.lines ?? []).map((l) => ({ sku: l.sku, qty: l.qty })),
      railName: rail,
      mandateType: session.mandate?.type ?? 'none',
      mandateRef: session.mandate?.ref ?? null,
      trustTier: tier.success ? tier.data : 'standard',
      buyer: session.buyer ?? null,
      source: 'ingest',
      now,
    }),
  );
}

/**
 * The claims of a self-hosted deployment's receipt, once its shape is that of a compact JWS:
 * three base64url segments (the contract's IngestReceipt), a protected header that is a JSON
 * object naming an `alg` other than `none`, and a payload that is a JSON object (jose decodes
 * both). Anything else is 400 RECEIPT_MALFORMED. The signature is not verified: it is the
 * deployment's own key, which this service does not hold (docs/decisions.md, "Ingested orders say so").
 */
function receiptClaimsOf(jws: string): Record<string, unknown> {
  if (!IngestReceipt.safeParse(jws).success) throw new ApiError('RECEIPT_MALFORMED', 'receipt: must be three base64url segments separated by dots (a compact JWS).');
  let alg: unknown;
  try {
    alg = decodeProtectedHeader(jws).alg;
  } catch {
    throw new ApiError('RECEIPT_MALFORMED', 'receipt: the first segment is not a base64url JSON object (the JWS header).');
  }
  if (typeof alg !== 'string' || alg === '' || alg.toLowerCase() === 'none') {
    throw new ApiError('RECEIPT_MALFORMED', 'receipt: the JWS header must name the signature algorithm (alg), and not "none".');
  }
  try {
    return decodeJwt(jws) as Record<string, unknown>;
  } catch {
    throw new ApiError('RECEIPT_MALFORMED', 'receipt: the second segment is not a base64url JSON object (the JWS payload).');
  }
}

/**
 * Ingest writes only rows ingest wrote for the same project and mode (and merchant, when
 * anchored). A session id that is a hosted checkout session, or whose order or reports
 * belong to another project, mode or merchant, is refused with one 409
 * SESSION_NOT_INGESTIBLE that says nothing more about whose it is.
 */
async function assertIngestible(em: Em, auth: AuthContext, sessionId: string, merchantId: string | null) {
  if (await sessionIdTakenElsewhere(em, auth, sessionId, merchantId)) throw new ApiError('SESSION_NOT_INGESTIBLE');
}

/** Two projects racing to ingest one new session id: the loser's unique violation is the same 409. */
async function refusingCollisions<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException && String(err.message).includes('orders_session')) {
      throw new ApiError('SESSION_NOT_INGESTIBLE');
    }
    throw err;
  }
}

export async function ingestSession(ctx: Authed, session: IngestSession) {
  return ctx.em.transactional(async (tx) => {
    const m = await anchor(tx, ctx.auth, session.merchantId);
    await assertIngestible(tx, ctx.auth, session.id, m?.id ?? null);
    await upsertIngestedSession(tx, ctx.auth, { sessionId: session.id, merchantId: m?.id ?? null, payload: JSON.stringify(session), now: ctx.services.now() });
    return respondIn(ctx, tx, 200, { ok: true as const, session_id: session.id, persisted: m !== null });
  });
}

/** Rule 1 and 2 of 4.9: one transaction, idempotent on session.id, the delta at most once. */
export async function ingestOrder(ctx: Authed, input: { session: IngestSession; receipt: string; settlement: { reference: string; rail?: string; chain?: string } }) {
  const { session } = input;
  if (session.state !== 'accepted') throw new ApiError('VALIDATION_FAILED', `body.session.state: must be "accepted" to ingest an order, got ${JSON.stringify(session.state ?? null)}.`);
  const agentId = requireAgent(session);
  const claims = receiptClaimsOf(input.receipt);
  const now = ctx.services.now();
  return refusingCollisions(() => ctx.em.transactional(async (tx) => {
    const m = await anchor(tx, ctx.auth, session.merchantId);
    await assertIngestible(tx, ctx.auth, session.id, m?.id ?? null);
    if (!(await claimIngestReport(tx, ctx.auth, { kind: 'order', sessionId: session.id, agentId, merchantId: m?.id ?? null, decision: 'accept', now }))) {
      const prior = await findIngestReport(tx, ctx.auth, 'order', session.id);
      if (prior.order_id) return respondIn(ctx, tx, 201, { order_id: prior.order_id, receipt_id: prior.receipt_id, event_ids: [], replayed: true as const });
      const rep = await readReputation(tx, projectView(ctx.auth), 'agent', prior.agent_id);
      return respondIn(ctx, tx, 201, { order_id: null, receipt_id: null, event_ids: [], replayed: true as const, reputation_score: rep.score });
    }
    let orderId: string | null = null;
    let receiptId: string | null = null;
    const eventIds: string[] = [];
    if (m) {
      // A session reported held earlier and accepted now keeps its order id.
      const held = await orderOfSession(tx, session.id, m.id);
      const order = held ?? newIngestOrder(tx, now, m, session, agentId, 'accept', input.settlement.rail ?? session.railName ?? 'x402');
      order.decision = 'accept';
      receiptId = newId('rcpt');
      order.settlementRef = input.settlement.reference;
      order.receiptId = receiptId;
      await tx.flush();
      addReceipt(tx, receiptRow({ id: receiptId, orderId: order.id, sessionId: session.id, merchantId: m.id, jws: input.receipt, claims, now }));
      await tx.flush();
      orderId = order.id;
      const object = presentOrderEvent(order);
      for (const type of ['order.accepted', 'order.settled'] as const) {
        const evt = await ctx.services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type, object, now });
        eventIds.push(evt.id);
      }
      await applyReportedOutcome(tx, ctx.auth, session.id, 'merchant', m.id, 'settled_merchant', now);
      await setIngestReportOrder(tx, ctx.auth, 'order', session.id, { orderId, receiptId });
    }
    const rep = await applyReportedOutcome(tx, ctx.auth, session.id, 'agent', agentId, 'accepted', now);
    return respondIn(ctx, tx, 201, { order_id: orderId, receipt_id: receiptId, event_ids: eventIds, reputation: { agentId, score: rep.score, tier: rep.tier } });
  }));
}

/** Rule 3 of 4.9: hold fires order.held, reject fires order.rejected; accepted sessions go to /ingest/order. */
export async function ingestDecision(ctx: Authed, session: IngestSession) {
  const decision = session.verdict?.decision;
  if (!decision) throw new ApiError('VALIDATION_FAILED', 'body.session.verdict.decision: is required.');
  if (decision === 'accept') throw new ApiError('VALIDATION_FAILED', 'body.session.verdict.decision: accepted sessions are reported with POST /v1/ingest/order.');
  const agentId = requireAgent(session);
  const now = ctx.services.now();
  return refusingCollisions(() => ctx.em.transactional(async (tx) => {
    const m = await anchor(tx, ctx.auth, session.merchantId);
    await assertIngestible(tx, ctx.auth, session.id, m?.id ?? null);
    if (!(await claimIngestReport(tx, ctx.auth, { kind: 'decision', sessionId: session.id, agentId, merchantId: m?.id ?? null, decision, now }))) {
      const prior = await findIngestReport(tx, ctx.auth, 'decision', session.id);
      const rep = await readReputation(tx, projectView(ctx.auth), 'agent', prior.agent_id);
      return respondIn(ctx, tx, 200, {
        ok: true as const,
        decision: prior.decision as 'reject' | 'hold',
        event_ids: [],
        reputation: { agentId: prior.agent_id, score: rep.score, tier: rep.tier },
        replayed: true as const,
      });
    }
    const eventIds: string[] = [];
    if (m) {
      const existing = await orderOfSession(tx, session.id, m.id);
      if (existing && existing.decision === 'accept') {
        throw new ApiError('VALIDATION_FAILED', 'body.session: this session was already ingested as an accepted order.');
      }
      const order = existing ?? newIngestOrder(tx, now, m, session, agentId, decision, session.railName ?? 'x402');
      order.decision = decision;
      await tx.flush();
      const evt = await ctx.services.events.record(tx, {
        projectId: m.projectId,
        merchantId: m.id,
        livemode: m.livemode,
        type: decision === 'hold' ? 'order.held' : 'order.rejected',
        object: presentOrderEvent(order),
        now,
      });
      eventIds.push(evt.id);
      await setIngestReportOrder(tx, ctx.auth, 'decision', session.id, { orderId: order.id });
    }
    const rep = await applyReportedOutcome(tx, ctx.auth, session.id, 'agent', agentId, decision === 'hold' ? 'held' : 'rejected', now);
    return respondIn(ctx, tx, 200, { ok: true as const, decision, event_ids: eventIds, reputation: { agentId, score: rep.score, tier: rep.tier } });
  }));
}
