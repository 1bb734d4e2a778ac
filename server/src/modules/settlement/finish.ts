import type { ReasonCode, TrustTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { Ctx } from '../../http/context.js';
import { pollCall, releaseMandateSubjects, releasePaymentNonces, type SessionRow } from '../checkout/index.js';
import type { GateContext, MandateResult, Verdict } from '../gate/index.js';
import type { SettleMerchant } from '../merchants/index.js';
import { orderById, presentOrderEvent } from '../orders/index.js';
import { applyOutcome } from '../reputation/index.js';
import { newOrder, storeSettleResult } from './accepted.js';
import { rejected, type SettlePayment, type SettleResult } from './outcome.js';

/**
 * The gate's non-accepting ends and the compensation steps (docs/settlement.md): a rejection,
 * a hold, the rejection of a held or approved session, and the reservations they release.
 * Each runs in the caller's transaction with the session row locked.
 */

export const HOLD_REVIEW_SECONDS = 24 * 3600;

/** The dashboard's review page of a held session, in the session's mode (signing in first when needed). */
export const reviewUrl = (baseUrl: string, s: { id: string; livemode: boolean }) => `${baseUrl}/dashboard/${s.livemode ? 'live' : 'test'}/holds/${s.id}`;

/** Nothing is captured: the authorization's nonce and the mandate are free again. */
export async function releaseReservations(tx: Em, sessionId: string) {
  await releasePaymentNonces(tx, sessionId);
  await releaseMandateSubjects(tx, sessionId);
}

/** A payment refused before anything was reserved: the agent's reputation counts it, in a transaction of its own. */
export async function recordPaymentInvalid(input: { em: Em; now: Date; session: SessionRow; result: SettleResult }): Promise<SettleResult> {
  const { session: s } = input;
  await input.em.fork().transactional((tx) => applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'payment_invalid', input.now));
  return input.result;
}

/** A gate rejection (mandate, replay or verdict) of a settle. */
export type RejectInput = {
  tx: Em;
  ctx: Ctx;
  merchant: SettleMerchant;
  session: SessionRow;
  paymentHash: string;
  payment: SettlePayment;
  codes: ReasonCode[];
  human?: string | undefined;
  tier: TrustTier;
  mandate: MandateResult;
  outcome: 'rejected' | 'replay_attempt';
  /** The verdict when the policy rejected (else one is made from the codes). */
  verdict?: Verdict | undefined;
};

export async function finishRejected(input: RejectInput): Promise<SettleResult> {
  const { tx, ctx, merchant: m, session: s, codes, mandate } = input;
  // Nothing is captured on a reject, so the authorization nonce and mandate are released.
  await releaseReservations(tx, s.id);
  const now = ctx.services.now();
  s.state = 'rejected';
  s.settledAt = now;
  s.payment = input.payment as Record<string, unknown>;
  s.verdict = input.verdict ?? { decision: 'reject', tier: input.tier, reasonCodes: codes, signals: { mandateType: mandate.type } };
  const order = newOrder(tx, now, m, s, 'reject', input.tier, { ...mandate, ref: mandate.ok ? mandate.ref : null });
  s.orderId = order.id;
  await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, input.outcome, now);
  const result = rejected(codes, input.human ?? (codes.length > 1 ? `Rejected by the gate: ${codes.join(', ')}.` : undefined));
  storeSettleResult(s, input.paymentHash, result);
  await tx.flush();
  await ctx.services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: presentOrderEvent(order), now });
  return result;
}

/** The verdict held the order for merchant review (docs/settlement.md, "Holds"). */
export async function finishHeld(input: { tx: Em; ctx: Ctx; merchant: SettleMerchant; session: SessionRow; paymentHash: string; gate: GateContext; baseUrl: string }): Promise<SettleResult> {
  const { tx, ctx, merchant: m, session: s, gate } = input;
  const now = ctx.services.now();
  s.state = 'held';
  s.settledAt = now;
  s.holdExpiresAt = new Date(now.getTime() + HOLD_REVIEW_SECONDS * 1000);
  s.gate = gate;
  const order = newOrder(tx, now, m, s, 'hold', gate.verdict.tier, gate.mandate);
  s.orderId = order.id;
  await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'held', now);
  const result: SettleResult = {
    status: 202,
    body: {
      status: 'hold',
      review_url: reviewUrl(input.baseUrl, s),
      reason_codes: gate.verdict.reasonCodes,
      error_human: 'The order is held for merchant review; poll the session for the outcome.',
      next: pollCall(s.pathPrefix, s.id),
    },
  };
  storeSettleResult(s, input.paymentHash, result);
  await tx.flush();
  await ctx.services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.held', object: presentOrderEvent(order), now });
  return result;
}

/**
 * Rejects a held or approved session (merchant decline, lapsed review window, lapsed
 * re-authorization), in the caller's transaction with the session row locked.
 */
export async function rejectHeld(input: {
  tx: Em;
  services: Pick<Ctx['services'], 'now' | 'events'>;
  merchant: SettleMerchant;
  session: SessionRow;
  code: ReasonCode;
  /** The agent's reputation counts the rejection (a merchant's decision; not a window that lapsed unattended). */
  penalize: boolean;
}) {
  const { tx, services, merchant: m, session: s, code } = input;
  await releaseReservations(tx, s.id);
  const order = s.orderId ? await orderById(tx, s.orderId) : null;
  const now = services.now();
  s.state = 'rejected';
  s.settledAt = now;
  s.gate = null;
  s.verdict = { ...(s.verdict ?? { tier: order?.trustTier ?? 'cautious', signals: {} }), decision: 'reject', reasonCodes: [code] } as SessionRow['verdict'];
  if (order) order.decision = 'reject';
  if (input.penalize) await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'rejected', now);
  if (s.settlePaymentHash) storeSettleResult(s, s.settlePaymentHash, rejected([code]));
  await tx.flush();
  if (order) await services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: presentOrderEvent(order), now });
}
