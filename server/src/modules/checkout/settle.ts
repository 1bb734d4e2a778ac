import { LockMode } from '@mikro-orm/core';
import { humanOf, resolvePolicy, type ReasonCode, type SettleBody, type Total } from '@svc/contract';
import type { Hex } from 'viem';
import type { Em } from '../../db/orm.js';
import type { Ctx } from '../../http/context.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { facilitatorFor, settleMockRail } from '../../rails/index.js';
import type { Authorization } from '../gate/eip712.js';
import { verifyMandate, type MandateResult } from '../gate/mandate.js';
import { inputFingerprint, signReceipt, type ReceiptClaims } from '../gate/receipt.js';
import { evaluatePolicy, trustTier, type Verdict } from '../gate/verdict.js';
import { recordEvent } from '../events/service.js';
import type { MerchantRow } from '../merchants/service.js';
import { OrderEntity, ReceiptEntity } from '../orders/entity.js';
import { activePolicy, policyHash } from '../policy/service.js';
import { applyOutcome, readReputation } from '../reputation/service.js';
import { CheckoutSessionEntity, totalOf, type SessionRow } from './entity.js';
import { findSession, pollCall } from './service.js';

export const HOLD_REVIEW_SECONDS = 24 * 3600;

export type SettleResult =
  | { status: 200; body: { status: 'accepted'; order_id: string; receipt: string; fulfillment: { rail: string; reference: string } } }
  | { status: 202; body: { status: 'hold'; review_url: string; reason_codes: string[]; error_human: string; next: string } }
  | { status: 402; body: { status: 'payment_invalid'; reason_codes: string[]; error_human: string } }
  | { status: 403; body: { status: 'rejected'; reason_codes: string[]; error_human: string } };

const paymentInvalid = (code: ReasonCode, human?: string): SettleResult => ({
  status: 402,
  body: { status: 'payment_invalid', reason_codes: [code], error_human: human ?? humanOf(code) },
});
const rejected = (codes: ReasonCode[], human?: string): SettleResult => ({
  status: 403,
  body: { status: 'rejected', reason_codes: codes, error_human: human ?? humanOf(codes[0]!) },
});

/** Thrown inside the settle transaction to roll it back (releasing reservations) with a 402. */
class CaptureFailure extends Error {
  constructor(readonly code: ReasonCode, readonly human: string) {
    super(human);
  }
}

const TERMINAL = new Set(['accepted', 'rejected', 'held']);

/** A repeat of the payment that produced a terminal result replays it; another payment is 409. */
function replayOrConflict(s: SessionRow, paymentHash: string): SettleResult {
  if (s.settlePaymentHash === paymentHash && s.settleResponse && s.settleStatus) {
    return { status: s.settleStatus, body: JSON.parse(s.settleResponse) } as SettleResult;
  }
  throw new ApiError('SESSION_ALREADY_SETTLED', `The session is already ${s.state}; a different payment cannot settle it.`);
}

function x402Payment(payment: SettleBody['payment']): { auth: Authorization; signature: Hex; scheme: string } | null {
  if (!('authorization' in payment)) return null;
  return { auth: payment.authorization, signature: payment.signature as Hex, scheme: payment.scheme };
}

/** The event and feed projection of an order (section 6 order object). */
export function orderObject(o: InstanceType<typeof OrderEntity.class>): Record<string, unknown> {
  return {
    id: o.id,
    session_id: o.sessionId,
    merchant_id: o.merchantId,
    agent_id: o.agentId,
    total: o.total,
    items: o.items,
    rail_name: o.railName,
    ...(o.settlementRef ? { settlement_ref: o.settlementRef } : {}),
    ...(o.receiptId ? { receipt_id: o.receiptId } : {}),
    mandate_type: o.mandateType,
    mandate_ref: o.mandateRef ?? null,
    trust_tier: o.trustTier,
    ...(o.buyer ? { buyer: o.buyer } : {}),
  };
}

type GateContext = { mandate: MandateResult; verdict: Verdict; policyVersion: number; policyHash: string; fingerprintInputs: Record<string, unknown> };

/**
 * POST settle: load -> idempotent replay -> proof check -> mandate verify -> (one transaction:
 * row lock, replay reservations by unique constraints, reputation, verdict, capture, receipt).
 */
export async function settleSession(ctx: Ctx, m: MerchantRow, sessionId: string, body: SettleBody, baseUrl: string): Promise<SettleResult> {
  const { em, services } = ctx;
  const now = services.now();
  const nowSec = Math.floor(now.getTime() / 1000);
  const s = await findSession(em, m, sessionId);
  const paymentHash = canonicalHash(body.payment);

  if (TERMINAL.has(s.state)) return replayOrConflict(s, paymentHash);
  if (s.state === 'expired' || now > s.expiresAt) {
    if (s.state !== 'expired') await em.execute(`update checkout_sessions set state = 'expired' where id = ? and state = 'awaiting_payment'`, [s.id]);
    throw new ApiError('SESSION_EXPIRED');
  }

  // Proof of payment, checked before anything is reserved (a bad proof reserves nothing).
  const x402 = x402Payment(body.payment);
  if (s.rail === 'card') return paymentInvalid('RAIL_NOT_IMPLEMENTED');
  if (s.rail === 'mock') {
    if (m.livemode) throw new ApiError('TEST_MODE_RAIL_FORBIDDEN');
    if (x402) return await recordPaymentInvalid(em, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the mock rail: send {"payment":{"mock":true}}.'));
  } else {
    if (!x402) return await recordPaymentInvalid(em, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the x402 rail: send an x402-exact payment.'));
    if (x402.scheme !== 'x402-exact') {
      return await recordPaymentInvalid(em, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', `payment.scheme must be x402-exact, got ${x402.scheme}.`));
    }
    const verified = await facilitatorFor(services.facilitators, m.livemode).verify(
      { chain: s.chain!, payTo: s.payTo!, amountBaseUnits: s.amountBaseUnits!, authorization: x402.auth, signature: x402.signature },
      nowSec,
    );
    if (!verified.ok) return await recordPaymentInvalid(em, s, paymentInvalid(verified.code, verified.human));
  }

  const mandate = await verifyMandate(s.mandate, {
    jwksUrl: m.trustedSvcJwksUrl ?? null,
    merchantId: m.id,
    merchantDomain: m.domain,
    total: s.total,
    currency: s.currency,
    agentId: s.agentId,
    now,
  });
  if (mandate.present && !mandate.ok && mandate.code === 'MANDATE_ISSUER_UNAVAILABLE') {
    // The issuer's keys could not be fetched: not the agent's fault, so not terminal.
    return rejected(['MANDATE_ISSUER_UNAVAILABLE'], mandate.human);
  }

  try {
    return await em.transactional(async (tx) => {
      const locked = await tx.findOneOrFail(CheckoutSessionEntity, { id: s.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (TERMINAL.has(locked.state)) return replayOrConflict(locked, paymentHash);
      if (locked.state !== 'awaiting_payment') throw new ApiError('SESSION_EXPIRED');
      // One gate at a time per (merchant, agent): velocity and daily caps count the agent's other
      // sessions, so a concurrent settle must wait for this one to commit (row locks cover only this session).
      await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`gate:${locked.merchantId}:${locked.agentId}`]);
      const reputation = await readReputation(tx, 'agent', locked.agentId);
      const tierNow = trustTier(mandate, reputation.known);

      if (mandate.present && !mandate.ok) {
        return finishRejected(tx, ctx, m, locked, paymentHash, body, [mandate.code ?? 'MANDATE_MALFORMED'], mandate.human, tierNow, mandate, 'rejected');
      }
      if (mandate.present && mandate.ok && mandate.issuer && mandate.subject) {
        const won = await tx.execute(
          'insert into mandate_subjects (issuer, subject, session_id) values (?, ?, ?) on conflict do nothing returning subject',
          [mandate.issuer, mandate.subject, locked.id],
        );
        if (won.length === 0) {
          return finishRejected(tx, ctx, m, locked, paymentHash, body, ['MANDATE_REPLAY'], undefined, tierNow, mandate, 'replay_attempt');
        }
      }
      if (x402) {
        const won = await tx.execute(
          'insert into payment_nonces (chain, payer, nonce, session_id) values (?, ?, ?, ?) on conflict do nothing returning nonce',
          [locked.chain, x402.auth.from.toLowerCase(), x402.auth.nonce.toLowerCase(), locked.id],
        );
        if (won.length === 0) {
          // Roll back the mandate reservation too, but keep the reputation penalty.
          throw new CaptureFailure('NONCE_ALREADY_USED', humanOf('NONCE_ALREADY_USED'));
        }
      }

      const velocity = await velocityOf(tx, locked);
      const policyRow = await activePolicy(tx, m.id);
      const policy = resolvePolicy(policyRow?.body);
      const verdict = evaluatePolicy({
        policy,
        total: locked.total,
        currency: locked.currency,
        rail: locked.rail,
        agentId: locked.agentId,
        mandate,
        reputation,
        velocity,
        intent: locked.buyerIntent ?? null,
      });
      const gate: GateContext = {
        mandate,
        verdict,
        policyVersion: policyRow?.version ?? 0,
        policyHash: policyRow?.hash ?? policyHash({}),
        fingerprintInputs: {
          sessionId: locked.id,
          lines: locked.lines.map((l) => ({ sku: l.sku, qty: l.qty, unitPrice: l.unitPrice })),
          total: totalOf(locked),
          rail: locked.rail,
          payment: body.payment,
          mandate: { type: mandate.type, ref: mandate.ref },
          reputation,
          velocity,
          policyHash: policyRow?.hash ?? policyHash({}),
        },
      };
      locked.verdict = verdict;
      locked.policyVersion = gate.policyVersion;
      locked.policyHash = gate.policyHash;
      locked.payment = body.payment as Record<string, unknown>;

      if (verdict.decision === 'reject') {
        return finishRejected(tx, ctx, m, locked, paymentHash, body, verdict.reasonCodes, undefined, verdict.tier, mandate, 'rejected', verdict);
      }
      if (verdict.decision === 'hold') {
        return finishHeld(tx, ctx, m, locked, paymentHash, gate, baseUrl);
      }
      return capture(tx, ctx, m, locked, paymentHash, gate, null);
    });
  } catch (err) {
    if (err instanceof CaptureFailure) {
      const outcome = err.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid';
      await em.fork().transactional((tx) => applyOutcome(tx, s.id, 'agent', s.agentId, outcome));
      return paymentInvalid(err.code, err.human);
    }
    throw err;
  }
}

async function recordPaymentInvalid(em: Em, s: SessionRow, result: SettleResult): Promise<SettleResult> {
  await em.fork().transactional((tx) => applyOutcome(tx, s.id, 'agent', s.agentId, 'payment_invalid'));
  return result;
}

/** Accepted and in-flight (held) sessions of this agent at this merchant in the rolling windows. */
async function velocityOf(tx: Em, s: SessionRow) {
  const rows = await tx.execute<Array<{ last_hour: string | number; last_day: string | number; day_spend: string | null }>>(
    `select
       count(*) filter (where created_at > now() - interval '1 hour') as last_hour,
       count(*) as last_day,
       coalesce(sum(total::numeric), 0)::text as day_spend
     from checkout_sessions
     where merchant_id = ? and agent_id = ? and id <> ? and state in ('accepted', 'held', 'settling')
       and created_at > now() - interval '1 day'`,
    [s.merchantId, s.agentId, s.id],
  );
  const r = rows[0]!;
  return { lastHour: Number(r.last_hour), lastDay: Number(r.last_day), daySpend: r.day_spend ?? '0' };
}

function newOrder(tx: Em, m: MerchantRow, s: SessionRow, decision: 'accept' | 'reject' | 'hold', tier: string, mandate: MandateResult) {
  return tx.create(OrderEntity, {
    id: newId('ord'),
    sessionId: s.id,
    projectId: m.projectId,
    merchantId: m.id,
    livemode: m.livemode,
    agentId: s.agentId,
    decision,
    total: totalOf(s) as Total,
    items: s.lines.map((l) => ({ sku: l.sku, qty: l.qty })),
    railName: s.rail,
    settlementRef: null,
    receiptId: null,
    mandateType: mandate.type,
    mandateRef: mandate.ref,
    trustTier: tier as 'premium' | 'trusted' | 'standard' | 'cautious',
    buyer: s.buyer ?? null,
    source: 'hosted',
  });
}

function storeSettleResult(s: SessionRow, paymentHash: string, result: SettleResult) {
  s.settlePaymentHash = paymentHash;
  s.settleStatus = result.status;
  s.settleResponse = JSON.stringify(result.body);
  return result;
}

async function finishRejected(
  tx: Em,
  ctx: Ctx,
  m: MerchantRow,
  s: SessionRow,
  paymentHash: string,
  body: SettleBody,
  codes: ReasonCode[],
  human: string | undefined,
  tier: string,
  mandate: MandateResult,
  outcome: 'rejected' | 'replay_attempt',
  verdict?: Verdict,
): Promise<SettleResult> {
  // Nothing is captured on a reject, so the authorization nonce and mandate are released.
  await tx.execute('delete from payment_nonces where session_id = ?', [s.id]);
  await tx.execute('delete from mandate_subjects where session_id = ?', [s.id]);
  s.state = 'rejected';
  s.settledAt = ctx.services.now();
  s.payment = body.payment as Record<string, unknown>;
  s.verdict = verdict ?? { decision: 'reject', tier, reasonCodes: codes, signals: { mandateType: mandate.type } };
  const order = newOrder(tx, m, s, 'reject', tier, { ...mandate, ref: mandate.ok ? mandate.ref : null });
  s.orderId = order.id;
  await applyOutcome(tx, s.id, 'agent', s.agentId, outcome);
  await tx.flush();
  await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: orderObject(order) });
  const result = rejected(codes, human ?? (codes.length > 1 ? `Rejected by the gate: ${codes.join(', ')}.` : undefined));
  storeSettleResult(s, paymentHash, result);
  await tx.flush();
  return result;
}

async function finishHeld(tx: Em, ctx: Ctx, m: MerchantRow, s: SessionRow, paymentHash: string, gate: GateContext, baseUrl: string): Promise<SettleResult> {
  const now = ctx.services.now();
  s.state = 'held';
  s.settledAt = now;
  s.holdExpiresAt = new Date(now.getTime() + HOLD_REVIEW_SECONDS * 1000);
  const order = newOrder(tx, m, s, 'hold', gate.verdict.tier, gate.mandate);
  s.orderId = order.id;
  await applyOutcome(tx, s.id, 'agent', s.agentId, 'held');
  await tx.flush();
  await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.held', object: orderObject(order) });
  const result: SettleResult = {
    status: 202,
    body: {
      status: 'hold',
      review_url: `${baseUrl}/v1/sessions/${s.id}`,
      reason_codes: gate.verdict.reasonCodes,
      error_human: 'The order is held for merchant review; poll the session for the outcome.',
      next: pollCall(s.pathPrefix, s.id),
    },
  };
  storeSettleResult(s, paymentHash, result);
  await tx.flush();
  return result;
}

/**
 * Capture and receipt, in the caller's transaction: settle through the rail, then write the
 * order, the receipt, the reputation deltas, the session state and both events together.
 * Used by an accepting settle and by a merchant approving a held session.
 */
export async function capture(
  tx: Em,
  ctx: Ctx,
  m: MerchantRow,
  s: SessionRow,
  paymentHash: string,
  gate: GateContext,
  existingOrderId: string | null,
): Promise<Extract<SettleResult, { status: 200 }>> {
  const now = ctx.services.now();
  let reference: string;
  if (s.rail === 'mock') {
    reference = settleMockRail().reference;
  } else if (s.rail === 'x402') {
    const p = s.payment as { authorization: Authorization; signature: Hex };
    const settled = await facilitatorFor(ctx.services.facilitators, m.livemode).settle(
      { chain: s.chain!, payTo: s.payTo!, amountBaseUnits: s.amountBaseUnits!, authorization: p.authorization, signature: p.signature },
      { nowSec: Math.floor(now.getTime() / 1000), waitMs: 10_000, recordBroadcast: async () => undefined },
    );
    if (settled.status === 'failed') throw new CaptureFailure(settled.code, settled.human);
    if (settled.status !== 'settled') throw new CaptureFailure('CAPTURE_FAILED', 'The settlement did not confirm in time.');
    reference = settled.reference;
  } else {
    throw new CaptureFailure('RAIL_NOT_IMPLEMENTED', humanOf('RAIL_NOT_IMPLEMENTED'));
  }

  let order = existingOrderId ? await tx.findOne(OrderEntity, { id: existingOrderId }) : null;
  if (!order) order = newOrder(tx, m, s, 'accept', gate.verdict.tier, gate.mandate);
  const receiptId = newId('rcpt');
  order.decision = 'accept';
  order.settlementRef = reference;
  order.receiptId = receiptId;
  await tx.flush(); // entities carry plain id columns, so insert the order before its receipt

  const claims: ReceiptClaims = {
    iss: 'svc-checkout',
    sub: receiptId,
    iat: Math.floor(now.getTime() / 1000),
    sessionId: s.id,
    orderId: order.id,
    merchantId: m.id,
    agentId: s.agentId,
    decision: 'accept',
    total: totalOf(s),
    reasonCodes: gate.verdict.reasonCodes,
    mandateType: gate.mandate.type,
    mandateRef: gate.mandate.ref,
    policyHash: gate.policyHash,
    policyVersion: gate.policyVersion,
    rail: s.rail,
    settlementRef: reference,
    chain: s.chain ?? null,
    livemode: m.livemode,
    inputFingerprint: inputFingerprint(gate.fingerprintInputs),
  };
  const seed = ctx.services.box.open(m.receiptSeedSealed, m.id);
  const jws = await signReceipt({ d: seed, x: m.receiptPublicX, kid: m.receiptKid }, claims);
  tx.create(ReceiptEntity, { id: receiptId, orderId: order.id, sessionId: s.id, merchantId: m.id, jws, claims: claims as unknown as Record<string, unknown> });

  s.state = 'accepted';
  s.settledAt = now;
  s.orderId = order.id;
  s.receiptId = receiptId;
  s.receiptJws = jws;
  s.settlementRef = reference;
  s.verdict = gate.verdict;
  await applyOutcome(tx, s.id, 'agent', s.agentId, 'accepted');
  await applyOutcome(tx, s.id, 'merchant', m.id, 'settled_merchant');
  await tx.flush();
  const object = orderObject(order);
  await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.accepted', object, now });
  await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.settled', object, now });
  const result = {
    status: 200 as const,
    body: { status: 'accepted' as const, order_id: order.id, receipt: jws, fulfillment: { rail: s.rail, reference } },
  };
  storeSettleResult(s, paymentHash, result);
  await tx.flush();
  return result;
}

/** Merchant review: approve runs capture with the stored payment; decline rejects. */
export async function resolveHold(ctx: Ctx, m: MerchantRow, sessionId: string, action: 'approve' | 'decline') {
  const { em } = ctx;
  const s = await findSession(em, m, sessionId);
  let outcome;
  try {
    outcome = await em.transactional(async (tx) => {
      const locked = await tx.findOneOrFail(CheckoutSessionEntity, { id: s.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (locked.state !== 'held') throw new ApiError('SESSION_NOT_HELD', `The session is ${locked.state}, not held for review.`);
      const now = ctx.services.now();
      const expired = locked.holdExpiresAt !== null && locked.holdExpiresAt !== undefined && now > locked.holdExpiresAt;
      const order = locked.orderId ? await tx.findOne(OrderEntity, { id: locked.orderId }) : null;
      const mandateType = (order?.mandateType ?? 'none') as MandateResult['type'];
      const mandate: MandateResult = { type: mandateType, present: mandateType !== 'none', ok: true, ref: order?.mandateRef ?? null };
      if (action === 'decline' || expired) {
        const code: ReasonCode = expired ? 'REVIEW_WINDOW_EXPIRED' : 'MERCHANT_DECLINED';
        await tx.execute('delete from payment_nonces where session_id = ?', [locked.id]);
        await tx.execute('delete from mandate_subjects where session_id = ?', [locked.id]);
        locked.state = 'rejected';
        locked.verdict = { ...(locked.verdict ?? { tier: order?.trustTier ?? 'cautious', signals: {} }), decision: 'reject', reasonCodes: [code] } as SessionRow['verdict'];
        if (order) order.decision = 'reject';
        await applyOutcome(tx, locked.id, 'agent', locked.agentId, 'rejected');
        await tx.flush();
        if (order) await recordEvent(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: orderObject(order) });
        if (locked.settlePaymentHash) storeSettleResult(locked, locked.settlePaymentHash, rejected([code]));
        await tx.flush();
        if (expired && action === 'approve') return { kind: 'expired' as const, body: null };
        return { kind: 'declined' as const, body: { status: 'rejected' as const, session_id: locked.id, order_id: locked.orderId ?? null } };
      }
      const verdict = locked.verdict!;
      const gate: GateContext = {
        mandate,
        verdict: { ...verdict, decision: 'accept', tier: verdict.tier as Verdict['tier'], reasonCodes: ['OK'] } as Verdict,
        policyVersion: locked.policyVersion ?? 0,
        policyHash: locked.policyHash ?? policyHash({}),
        fingerprintInputs: { sessionId: locked.id, total: totalOf(locked), payment: locked.payment, heldVerdict: verdict, approvedAt: now.toISOString() },
      };
      const result = await capture(tx, ctx, m, locked, locked.settlePaymentHash ?? '', gate, locked.orderId ?? null);
      return { kind: 'approved' as const, body: result.body };
    });
  } catch (err) {
    if (err instanceof CaptureFailure) throw new ApiError(err.code === 'INSUFFICIENT_FUNDS' ? 'INSUFFICIENT_FUNDS' : 'CAPTURE_FAILED', err.human);
    throw err;
  }
  // The expired hold was rejected and committed above; approving it is now a conflict.
  if (outcome.kind === 'expired') throw new ApiError('SESSION_NOT_HELD', 'The 24 h review window has passed; the session was rejected.');
  return outcome;
}
