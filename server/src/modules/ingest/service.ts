import { decodeJwt } from 'jose';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { TrustTier, type IngestSession, type Total } from '@svc/contract';
import type { AuthContext, Ctx } from '../../http/context.js';
import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { recordEvent } from '../events/service.js';
import { MerchantEntity } from '../merchants/entity.js';
import type { MerchantRow } from '../merchants/service.js';
import { OrderEntity, ReceiptEntity } from '../orders/entity.js';
import { orderObject } from '../settlement/accepted.js';
import { applyOutcome, readReputation } from '../reputation/service.js';

type Authed = Ctx & { auth: AuthContext };

/** The merchant a self-hosted session anchors to: an `mrch_` id of the key's project and mode. */
async function anchor(em: Em, auth: AuthContext, merchantId: string | undefined): Promise<MerchantRow | null> {
  if (!merchantId || !hasPrefix(merchantId, 'mrch')) return null;
  return em.findOne(MerchantEntity, { id: merchantId, projectId: auth.projectId, livemode: auth.livemode });
}

function requireAgent(session: IngestSession): string {
  if (!session.agentId) throw new ApiError('VALIDATION_FAILED', 'body.session.agentId: is required (it anchors reputation).');
  return session.agentId;
}

const isDecimal = (v: unknown) => typeof v === 'string' && /^\d{1,12}(\.\d{1,8})?$/.test(v);
function totalOf(session: IngestSession): Total | null {
  const t = session.total;
  if (!t || !isDecimal(t.subtotal) || !isDecimal(t.tax) || !isDecimal(t.total)) return null;
  return { currency: t.currency.toUpperCase(), subtotal: t.subtotal, tax: t.tax, total: t.total };
}

function newIngestOrder(tx: Em, m: MerchantRow, session: IngestSession, agentId: string, decision: 'accept' | 'reject' | 'hold', rail: string) {
  const tier = TrustTier.safeParse(session.verdict?.tier);
  return tx.create(OrderEntity, {
    id: newId('ord'),
    sessionId: session.id,
    projectId: m.projectId,
    merchantId: m.id,
    livemode: m.livemode,
    agentId,
    decision,
    total: totalOf(session),
    items: (session.lines ?? []).map((l) => ({ sku: l.sku, qty: l.qty })),
    railName: rail,
    settlementRef: null,
    receiptId: null,
    mandateType: session.mandate?.type ?? 'none',
    mandateRef: session.mandate?.ref ?? null,
    trustTier: tier.success ? tier.data : 'standard',
    buyer: session.buyer ?? null,
    source: 'ingest',
  });
}

/** Claims the (project, mode, kind, session) slot; false when this report was already ingested. */
async function claim(tx: Em, auth: AuthContext, kind: 'order' | 'decision', session: IngestSession, agentId: string, merchantId: string | null, decision: string) {
  const rows = await tx.execute(
    `insert into ingest_log (project_id, livemode, kind, session_id, agent_id, merchant_id, decision) values (?, ?, ?, ?, ?, ?, ?)
     on conflict do nothing returning session_id`,
    [auth.projectId, auth.livemode, kind, session.id, agentId, merchantId, decision],
  );
  return rows.length > 0;
}

async function priorLog(tx: Em, auth: AuthContext, kind: 'order' | 'decision', sessionId: string) {
  const rows = await tx.execute<Array<{ order_id: string | null; receipt_id: string | null; agent_id: string; decision: string }>>(
    'select order_id, receipt_id, agent_id, decision from ingest_log where project_id = ? and livemode = ? and kind = ? and session_id = ?',
    [auth.projectId, auth.livemode, kind, sessionId],
  );
  return rows[0]!;
}

/**
 * Ingest writes only rows ingest wrote for the same project and mode (and merchant, when
 * anchored). A session id that is a hosted checkout session, or whose order or reports
 * belong to another project, mode or merchant, is refused with one 409
 * SESSION_NOT_INGESTIBLE that says nothing more about whose it is.
 */
async function assertIngestible(em: Em, auth: AuthContext, sessionId: string, merchantId: string | null) {
  const rows = await em.execute(
    `select 1 from checkout_sessions where id = ?
     union all select 1 from orders where session_id = ?
       and not (source = 'ingest' and project_id = ? and livemode = ? and (cast(? as text) is null or merchant_id = ?))
     union all select 1 from ingest_log where session_id = ? and not (project_id = ? and livemode = ?)
     union all select 1 from ingested_sessions where session_id = ? and not (project_id = ? and livemode = ?)
     limit 1`,
    [sessionId, sessionId, auth.projectId, auth.livemode, merchantId, merchantId, sessionId, auth.projectId, auth.livemode, sessionId, auth.projectId, auth.livemode],
  );
  if (rows.length > 0) throw new ApiError('SESSION_NOT_INGESTIBLE');
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
  const m = await anchor(ctx.em, ctx.auth, session.merchantId);
  await assertIngestible(ctx.em, ctx.auth, session.id, m?.id ?? null);
  await ctx.em.execute(
    `insert into ingested_sessions (project_id, livemode, session_id, merchant_id, payload) values (?, ?, ?, ?, ?)
     on conflict (project_id, livemode, session_id) do update set merchant_id = excluded.merchant_id, payload = excluded.payload, updated_at = now()`,
    [ctx.auth.projectId, ctx.auth.livemode, session.id, m?.id ?? null, JSON.stringify(session)],
  );
  return { ok: true as const, session_id: session.id, persisted: m !== null };
}

/** Rule 1 and 2 of 4.9: one transaction, idempotent on session.id, the delta at most once. */
export async function ingestOrder(ctx: Authed, input: { session: IngestSession; receipt: string; settlement: { reference: string; rail?: string; chain?: string } }) {
  const { session } = input;
  if (session.state !== 'accepted') throw new ApiError('VALIDATION_FAILED', `body.session.state: must be "accepted" to ingest an order, got ${JSON.stringify(session.state ?? null)}.`);
  const agentId = requireAgent(session);
  return refusingCollisions(() => ctx.em.transactional(async (tx) => {
    const m = await anchor(tx, ctx.auth, session.merchantId);
    await assertIngestible(tx, ctx.auth, session.id, m?.id ?? null);
    if (!(await claim(tx, ctx.auth, 'order', session, agentId, m?.id ?? null, 'accept'))) {
      const prior = await priorLog(tx, ctx.auth, 'order', session.id);
      if (prior.order_id) return { order_id: prior.order_id, receipt_id: prior.receipt_id, event_ids: [], replayed: true as const };
      const rep = await readReputation(tx, 'agent', prior.agent_id);
      return { order_id: null, receipt_id: null, event_ids: [], replayed: true as const, reputation_score: rep.score };
    }
    let orderId: string | null = null;
    let receiptId: string | null = null;
    const eventIds: string[] = [];
    if (m) {
      // A session reported held earlier and accepted now keeps its order id.
      const held = await tx.findOne(OrderEntity, { sessionId: session.id, merchantId: m.id });
      const order = held ?? newIngestOrder(tx, m, session, agentId, 'accept', input.settlement.rail ?? session.railName ?? 'x402');
      order.decision = 'accept';
      receiptId = newId('rcpt');
      order.settlementRef = input.settlement.reference;
      order.receiptId = receiptId;
      await tx.flush();
      let claims: Record<string, unknown> = {};
      try {
        claims = decodeJwt(input.receipt) as Record<string, unknown>;
      } catch {
        claims = {};
      }
      tx.create(ReceiptEntity, { id: receiptId, orderId: order.id, sessionId: session.id, merchantId: m.id, jws: input.receipt, claims });
      await tx.flush();
      orderId = order.id;
      const object = orderObject(order);
      for (const type of ['order.accepted', 'order.settled'] as const) {
        const evt = await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type, object });
        eventIds.push(evt.id);
      }
      await applyOutcome(tx, session.id, 'merchant', m.id, 'settled_merchant');
      await tx.execute('update ingest_log set order_id = ?, receipt_id = ? where project_id = ? and livemode = ? and kind = ? and session_id = ?', [
        orderId,
        receiptId,
        ctx.auth.projectId,
        ctx.auth.livemode,
        'order',
        session.id,
      ]);
    }
    const rep = await applyOutcome(tx, session.id, 'agent', agentId, 'accepted');
    return { order_id: orderId, receipt_id: receiptId, event_ids: eventIds, reputation: { agentId, score: rep.score, tier: rep.tier } };
  }));
}

/** Rule 3 of 4.9: hold fires order.held, reject fires order.rejected; accepted sessions go to /ingest/order. */
export async function ingestDecision(ctx: Authed, session: IngestSession) {
  const decision = session.verdict?.decision;
  if (!decision) throw new ApiError('VALIDATION_FAILED', 'body.session.verdict.decision: is required.');
  if (decision === 'accept') throw new ApiError('VALIDATION_FAILED', 'body.session.verdict.decision: accepted sessions are reported with POST /v1/ingest/order.');
  const agentId = requireAgent(session);
  return refusingCollisions(() => ctx.em.transactional(async (tx) => {
    const m = await anchor(tx, ctx.auth, session.merchantId);
    await assertIngestible(tx, ctx.auth, session.id, m?.id ?? null);
    if (!(await claim(tx, ctx.auth, 'decision', session, agentId, m?.id ?? null, decision))) {
      const prior = await priorLog(tx, ctx.auth, 'decision', session.id);
      const rep = await readReputation(tx, 'agent', prior.agent_id);
      return {
        ok: true as const,
        decision: prior.decision as 'reject' | 'hold',
        event_ids: [],
        reputation: { agentId: prior.agent_id, score: rep.score, tier: rep.tier },
        replayed: true as const,
      };
    }
    const eventIds: string[] = [];
    if (m) {
      const existing = await tx.findOne(OrderEntity, { sessionId: session.id, merchantId: m.id });
      if (existing && existing.decision === 'accept') {
        throw new ApiError('VALIDATION_FAILED', 'body.session: this session was already ingested as an accepted order.');
      }
      const order = existing ?? newIngestOrder(tx, m, session, agentId, decision, session.railName ?? 'x402');
      order.decision = decision;
      await tx.flush();
      const evt = await recordEvent(tx, {
        projectId: m.projectId,
        merchantId: m.id,
        livemode: m.livemode,
        type: decision === 'hold' ? 'order.held' : 'order.rejected',
        object: orderObject(order),
      });
      eventIds.push(evt.id);
      await tx.execute('update ingest_log set order_id = ? where project_id = ? and livemode = ? and kind = ? and session_id = ?', [
        order.id,
        ctx.auth.projectId,
        ctx.auth.livemode,
        'decision',
        session.id,
      ]);
    }
    const rep = await applyOutcome(tx, session.id, 'agent', agentId, decision === 'hold' ? 'held' : 'rejected');
    return { ok: true as const, decision, event_ids: eventIds, reputation: { agentId, score: rep.score, tier: rep.tier } };
  }));
}
