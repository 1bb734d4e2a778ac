import { humanOf } from '@svc/contract';
import type { Hex } from 'viem';
import type { Em } from '../../db/orm.js';
import { respondIn, type Ctx } from '../../http/context.js';
import { MIN_VALIDITY_SECONDS, type Authorization } from '../../lib/eip3009.js';
import { ApiError } from '../../lib/errors.js';
import { facilitatorFor } from '../../rails/index.js';
import type { Facilitator, PaymentProof } from '../../rails/types.js';
import { findSession, lockSession, releasePaymentNonces, reviewWindowLapsed, totalOf, type SessionRow } from '../checkout/index.js';
import type { GateContext } from '../gate/index.js';
import type { MerchantRow } from '../merchants/index.js';
import type { AcceptedResult } from './accepted.js';
import { beginCapture, CaptureFailure, reserveNonce } from './capture.js';
import { driveAttempt } from './engine.js';
import { rejectHeld } from './finish.js';
import type { HoldResolution } from './outcome.js';

/**
 * Merchant review of a held session (docs/settlement.md, "Holds"): `declineHold` rejects it;
 * `approveHold` captures the held authorization through the settlement engine, or, when that
 * authorization no longer has APPROVAL_MIN_VALIDITY_SECONDS left, `askForReauthorization`
 * makes the session `approved` and the agent signs a fresh one.
 */

/** Approval broadcasts an authorization only if it stays valid this long; else the agent signs a fresh one. */
export const APPROVAL_MIN_VALIDITY_SECONDS = 60;

/** One review: the merchant, the session, and what the merchant decided. */
export type ReviewInput = { ctx: Ctx; merchant: MerchantRow; sessionId: string; action: 'approve' | 'decline' };

type ReviewPhase1 =
  | { kind: 'done'; resolution: HoldResolution }
  | { kind: 'expired' }
  | { kind: 'drive'; attemptId: string; proof: PaymentProof; facilitator: Facilitator };

export const approveHold = (input: Omit<ReviewInput, 'action'>) => resolveHold({ ...input, action: 'approve' });
export const declineHold = (input: Omit<ReviewInput, 'action'>) => resolveHold({ ...input, action: 'decline' });

/** The review: phase 1 in one transaction (`reviewPhase`), then phase 2 and 3 when a capture was begun. */
export async function resolveHold(input: ReviewInput): Promise<HoldResolution> {
  const { ctx, merchant: m } = input;
  const { em, services } = ctx;
  const s = await findSession(em, m, input.sessionId);
  let phase1: ReviewPhase1;
  try {
    phase1 = await em.transactional(async (tx) => answerReview({ ctx, tx, session: s, phase1: await reviewPhase({ ...input, tx, sessionId: s.id }) }));
  } catch (err) {
    if (err instanceof CaptureFailure) throw new ApiError(err.code === 'INSUFFICIENT_FUNDS' ? 'INSUFFICIENT_FUNDS' : 'CAPTURE_FAILED', err.human);
    throw err;
  }
  // The expired hold was rejected and committed above; approving it is now a conflict.
  if (phase1.kind === 'expired') throw reviewWindowPassed();
  if (phase1.kind === 'done') return phase1.resolution;
  const outcome = await driveAttempt(services, phase1.attemptId, phase1.proof, phase1.facilitator, { merchant: m });
  if (outcome.kind === 'accepted') return { kind: 'approved', status: 200, body: outcome.result.body };
  if (outcome.kind === 'pending') return { kind: 'approval_pending', status: 202, body: settlementPendingBody(s) };
  throw new ApiError(outcome.code === 'INSUFFICIENT_FUNDS' ? 'INSUFFICIENT_FUNDS' : 'CAPTURE_FAILED', outcome.human);
}

/** Phase 1 of a review, with the session row locked: decline (or a lapsed window) rejects; approve re-verifies and begins the capture. */
async function reviewPhase(input: ReviewInput & { tx: Em }): Promise<ReviewPhase1> {
  const { tx, ctx, merchant: m, action } = input;
  const { services } = ctx;
  const locked = await lockSession(tx, input.sessionId);
  if (locked.state !== 'held') throw new ApiError('SESSION_NOT_HELD', `The session is ${locked.state}, not held for review.`);
  const now = services.now();
  const expired = reviewWindowLapsed(locked, now);
  if (action === 'decline' || expired) {
    await rejectHeld({ tx, services, merchant: m, session: locked, code: expired ? 'REVIEW_WINDOW_EXPIRED' : 'MERCHANT_DECLINED', penalize: true });
    if (expired && action === 'approve') return { kind: 'expired' };
    return { kind: 'done', resolution: { kind: 'declined', body: { status: 'rejected', session_id: locked.id, order_id: locked.orderId ?? null } } };
  }
  const held = locked.gate!;
  const gate: GateContext = {
    ...held,
    verdict: { ...held.verdict, decision: 'accept', reasonCodes: ['OK'] },
    fingerprintInputs: { sessionId: locked.id, total: totalOf(locked), payment: locked.payment, heldVerdict: held.verdict, approvedAt: now.toISOString() },
  };
  let proof: PaymentProof | null = null;
  let facilitator: Facilitator | null = null;
  if (locked.rail === 'x402') {
    const p = locked.payment as { authorization: Authorization; signature: Hex };
    proof = { chain: locked.chain!, payTo: locked.payTo!, amountBaseUnits: locked.amountBaseUnits!, authorization: p.authorization, signature: p.signature };
    facilitator = facilitatorFor(services.facilitators, m.livemode);
    if (p.authorization.validBefore < Math.floor(now.getTime() / 1000) + MIN_VALIDITY_SECONDS + APPROVAL_MIN_VALIDITY_SECONDS) {
      return { kind: 'done', resolution: await askForReauthorization({ tx, services, session: locked, gate }) };
    }
    // Canonical form (v 27/28, low s) as verified when the agent settled.
    const verified = await facilitator.verify(proof, Math.floor(now.getTime() / 1000));
    if (!verified.ok) throw new CaptureFailure(verified.code, verified.human);
    proof = verified.proof;
    await reserveNonce({ tx, now, session: locked, proof });
  }
  const began = await beginCapture({ tx, services, merchant: m, session: locked, paymentHash: locked.settlePaymentHash ?? '', gate, proof, facilitator, returnState: 'held' });
  if (began.kind === 'drive') return began;
  const result = began.result as AcceptedResult;
  return { kind: 'done', resolution: { kind: 'approved', status: 200, body: result.body } };
}

const reviewWindowPassed = () => new ApiError('SESSION_NOT_HELD', 'The 24 h review window has passed; the session was rejected.');

function settlementPendingBody(s: SessionRow) {
  return { status: 'settlement_pending' as const, session_id: s.id, order_id: s.orderId ?? null, reason_codes: ['SETTLEMENT_PENDING' as const], error_human: humanOf('SETTLEMENT_PENDING') };
}

/**
 * The review's answer is stored with its writes for an Idempotency-Key (http/idempotency.ts).
 * A capture that goes on chain after this transaction stores the pending answer provisionally:
 * a crash before the capture ends leaves "settlement pending" (the reconciler finishes it),
 * never a review that a retry would find no longer held.
 */
async function answerReview(input: { ctx: Ctx; tx: Em; session: SessionRow; phase1: ReviewPhase1 }): Promise<ReviewPhase1> {
  const { ctx, tx, phase1 } = input;
  if (phase1.kind === 'done') {
    const r = phase1.resolution;
    await respondIn(ctx, tx, r.kind === 'approval_pending' ? 202 : 200, r.body);
  } else if (phase1.kind === 'drive') {
    await ctx.idempotency?.completeIn(tx, 202, settlementPendingBody(input.session), { provisional: true });
  } else {
    const refused = reviewWindowPassed();
    await respondIn(ctx, tx, refused.status, refused.body());
  }
  return phase1;
}

/**
 * The held authorization expired (or would before it could be broadcast): hand the session
 * back to the agent under the approved verdict, with a fresh session lifetime to sign in.
 */
async function askForReauthorization(input: { tx: Em; services: Ctx['services']; session: SessionRow; gate: GateContext }): Promise<HoldResolution> {
  const { tx, services, session: s, gate } = input;
  const now = services.now();
  await releasePaymentNonces(tx, s.id);
  s.state = 'approved';
  s.gate = gate;
  s.verdict = gate.verdict;
  s.expiresAt = new Date(now.getTime() + services.config.SVC_SESSION_TTL_SECONDS * 1000);
  s.paymentError = null;
  await tx.flush();
  return {
    kind: 'approval_pending',
    status: 202,
    body: {
      status: 'awaiting_reauthorization',
      session_id: s.id,
      order_id: s.orderId ?? null,
      reason_codes: ['REAUTHORIZATION_REQUIRED'],
      error_human: humanOf('REAUTHORIZATION_REQUIRED'),
    },
  };
}
