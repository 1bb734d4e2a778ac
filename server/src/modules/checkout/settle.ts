import { unixSeconds } from '../../lib/time.js';
import { LockMode, UniqueConstraintViolationException } from '@mikro-orm/core';
import type { ServerInferResponseBody, ServerInferResponses } from '@ts-rest/core';
import { humanOf, resolvePolicy, type contract, type ReasonCode, type SettleRejected, type TrustTier } from '@svc/contract';
import type { Hex } from 'viem';
import type { Em } from '../../db/orm.js';
import { respondIn, type Ctx } from '../../http/context.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import { ApiError } from '../../lib/errors.js';
import { facilitatorFor, settleMockRail } from '../../rails/index.js';
import type { Facilitator, PaymentProof } from '../../rails/types.js';
import type { Services } from '../../http/context.js';
import { MIN_VALIDITY_SECONDS, type Authorization } from '../../lib/eip3009.js';
import { verifyMandate, type MandateResult } from '../gate/mandate.js';
import { outboundRules } from '../../lib/ssrf.js';
import { evaluatePolicy, trustTier, type Verdict } from '../gate/verdict.js';
import type { MerchantRow } from '../merchants/index.js';
import { OrderEntity } from '../orders/entity.js';
import { policyHash } from '../policy/index.js';
import { applyOutcome, reputationOf, subjectKey, type Reputation } from '../reputation/service.js';
import { presentOrderEvent } from '../orders/present.js';
import { newOrder, storeSettleResult, writeAccepted, writeAcceptedFresh, type AcceptedResult, type GateContext } from '../settlement/accepted.js';
import { attemptFields, driveAttempt, markSettled, type AttemptOutcome } from '../settlement/engine.js';
import { SettlementAttemptEntity } from '../settlement/entity.js';
import { insertAttemptSettling } from '../settlement/store.js';
import type { ReturnState } from '../settlement/entity.js';
import { CheckoutSessionEntity, totalOf, type SessionRow } from './entity.js';
import { findSession, pollCall } from './service.js';
import { expireSession, lockSessionForGate, readGateInputs, releaseMandateSubjects, releasePaymentNonces, reserveMandateSubject, reservePaymentNonce, type GateInputs, type NonceKey } from './store.js';

/**
 * The transport-neutral payment the gate settles: the canonical form every adapter (the JSON
 * body, the x402 headers: modules/x402) produces, with validAfter/validBefore as integers.
 */
export type SettlePayment = { scheme: string; authorization: Authorization; signature: string } | { mock: true };
export type SettleBody = { payment: SettlePayment };

export const HOLD_REVIEW_SECONDS = 24 * 3600;

/** The dashboard's review page of a held session, in the session's mode (signing in first when needed). */
export const reviewUrl = (baseUrl: string, s: { id: string; livemode: boolean }) => `${baseUrl}/dashboard/${s.livemode ? 'live' : 'test'}/holds/${s.id}`;
/** Approval broadcasts an authorization only if it stays valid this long; else the agent signs a fresh one. */
export const APPROVAL_MIN_VALIDITY_SECONDS = 60;

/** What settle answers itself (the contract's settle responses; 403 only as the gate's rejection, other errors are thrown). */
export type SettleResult = Extract<ServerInferResponses<typeof contract.agent.settle>, { status: 200 | 202 | 402 }> | { status: 403; body: SettleRejected };

const paymentInvalid = (code: ReasonCode, human?: string): SettleResult => ({
  status: 402,
  body: { status: 'payment_invalid', reason_codes: [code], error_human: human ?? humanOf(code) },
});
const rejected = (codes: ReasonCode[], human?: string): SettleResult => ({
  status: 403,
  body: { status: 'rejected', reason_codes: codes, error_human: human ?? humanOf(codes[0]!) },
});
const settlementPending = (s: Pick<SessionRow, 'pathPrefix' | 'id'>): SettleResult => ({
  status: 202,
  body: { status: 'settlement_pending', reason_codes: ['SETTLEMENT_PENDING'], error_human: humanOf('SETTLEMENT_PENDING'), next: pollCall(s.pathPrefix, s.id) },
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

/** A settle while the session's transfer is in flight: the same payment learns it is pending, another is 409. */
function whileSettling(s: SessionRow, paymentHash: string): SettleResult {
  if (s.settlePaymentHash === paymentHash) return settlementPending(s);
  throw new ApiError('SETTLEMENT_IN_PROGRESS');
}

function x402Payment(payment: SettleBody['payment']): { auth: Authorization; signature: Hex; scheme: string } | null {
  if (!('authorization' in payment)) return null;
  return { auth: payment.authorization, signature: payment.signature as Hex, scheme: payment.scheme };
}

/** What phase 1 hands to phase 2: a committed attempt, or a result already final. */
type Phase1 = { kind: 'done'; result: SettleResult } | { kind: 'drive'; attemptId: string; proof: PaymentProof; facilitator: Facilitator; session: SessionRow };

/**
 * POST settle: load -> idempotent replay -> proof check -> mandate verify -> phase 1 (one
 * transaction: row lock, replay reservations, reputation, verdict, and on accept a durable
 * settlement attempt) -> phase 2 (facilitator, no transaction) -> phase 3 (order, receipt,
 * events). An in-process facilitator (the test-mode mock) settles inside phase 1.
 */
export async function settleSession(ctx: Ctx, m: MerchantRow, sessionId: string, body: SettleBody, baseUrl: string): Promise<SettleResult> {
  // Every transport (JSON settle, x402 headers, the paid resource) settles here: one place to count outcomes.
  try {
    const result = await settleOnce(ctx, m, sessionId, body, baseUrl);
    ctx.services.metrics.observeSettle(result.body.status, ('reason_codes' in result.body ? result.body.reason_codes[0] : undefined) ?? 'NONE');
    return result;
  } catch (err) {
    ctx.services.metrics.observeSettle('error', err instanceof ApiError ? (err.codes[0] ?? 'INTERNAL') : 'INTERNAL');
    throw err;
  }
}

async function settleOnce(ctx: Ctx, m: MerchantRow, sessionId: string, body: SettleBody, baseUrl: string): Promise<SettleResult> {
  const { em, services } = ctx;
  const now = services.now();
  const nowSec = unixSeconds(now);
  const s = await findSession(em, m, sessionId);
  const paymentHash = canonicalHash(body.payment);

  if (TERMINAL.has(s.state)) return replayOrConflict(s, paymentHash);
  if (s.state === 'settling') return whileSettling(s, paymentHash);
  if (s.state === 'expired' || now > s.expiresAt) {
    if (s.state !== 'expired') await expireSession(em, s.id);
    throw new ApiError('SESSION_EXPIRED');
  }
  const approved = s.state === 'approved';

  // Proof of payment, checked before anything is reserved (a bad proof reserves nothing).
  const x402 = x402Payment(body.payment);
  let proof: PaymentProof | null = null;
  const facilitator = s.rail === 'x402' ? facilitatorFor(services.facilitators, m.livemode) : null;
  if (s.rail === 'card') return paymentInvalid('RAIL_NOT_IMPLEMENTED');
  if (s.rail === 'mock') {
    if (m.livemode) throw new ApiError('TEST_MODE_RAIL_FORBIDDEN');
    if (x402) return await recordPaymentInvalid(em, now, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the mock rail: send {"payment":{"mock":true}}.'));
  } else {
    if (!x402) return await recordPaymentInvalid(em, now, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the x402 rail: send an x402-exact payment.'));
    if (x402.scheme !== 'x402-exact') {
      return await recordPaymentInvalid(em, now, s, paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', `payment.scheme must be x402-exact, got ${x402.scheme}.`));
    }
    const verified = await facilitator!.verify(
      { chain: s.chain!, payTo: s.payTo!, amountBaseUnits: s.amountBaseUnits!, authorization: x402.auth, signature: x402.signature },
      nowSec,
    );
    if (!verified.ok) return await recordPaymentInvalid(em, now, s, paymentInvalid(verified.code, verified.human));
    proof = verified.proof;
  }

  // An approved session was gated already (the merchant approved the verdict); only the payment is new.
  const mandate: MandateResult = approved
    ? (s.gate as unknown as GateContext).mandate
    : await verifyMandate(s.mandate, {
        jwksUrl: m.trustedSvcJwksUrl ?? null,
        merchantId: m.id,
        merchantDomain: m.verifiedDomain ?? null,
        total: s.total,
        currency: s.currency,
        agentId: s.agentId,
        rules: outboundRules(ctx.services.config, m.livemode),
        now,
        issuerKeys: ctx.services.caches.issuerKeys,
      });
  if (mandate.present && !mandate.ok && mandate.code === 'MANDATE_ISSUER_UNAVAILABLE') {
    // The issuer's keys could not be fetched: not the agent's fault, so not terminal.
    return rejected(['MANDATE_ISSUER_UNAVAILABLE'], mandate.human);
  }

  let phase1: Phase1;
  try {
    phase1 = await em.transactional(async (tx): Promise<Phase1> => {
      const done = (result: SettleResult): Phase1 => ({ kind: 'done', result });
      // The row lock and, in the same statement, one gate at a time per (merchant, agent):
      // velocity and daily caps count the agent's other sessions, so a concurrent settle must
      // wait for this one to commit (row locks cover only this session).
      const row = await lockSessionForGate(tx, s.id, s.merchantId, s.agentId);
      if (!row) throw new ApiError('NOT_FOUND', 'No such checkout session.');
      const locked = tx.map(CheckoutSessionEntity, row);
      if (TERMINAL.has(locked.state)) return done(replayOrConflict(locked, paymentHash));
      if (locked.state === 'settling') return done(whileSettling(locked, paymentHash));
      if (locked.state !== (approved ? 'approved' : 'awaiting_payment')) throw new ApiError('SESSION_EXPIRED');
      const nonceKey = proof ? nonceKeyOf(proof) : null;

      let gate: GateContext;
      if (approved) {
        gate = locked.gate as unknown as GateContext;
        if (proof) await reserveNonce(tx, now, locked, proof);
      } else {
        // The gate's reads and the authorization's replay reservation: one statement.
        const inputs = await readGateInputs(
          tx,
          { id: locked.id, merchantId: locked.merchantId, agentId: locked.agentId, agentSubject: subjectKey(locked.agentId), livemode: m.livemode, projectId: m.projectId },
          nonceKey,
          now,
        );
        // The merchant's project's view in its mode: the shared score plus the project's own ingest reports.
        const reputation = reputationOf(inputs.agentReputation);
        const tierNow = trustTier(mandate, reputation.known);
        if (mandate.present && !mandate.ok) {
          return done(await finishRejected(tx, ctx, m, locked, paymentHash, body, [mandate.code ?? 'MANDATE_MALFORMED'], mandate.human, tierNow, mandate, 'rejected'));
        }
        if (mandate.present && mandate.ok && mandate.issuer && mandate.subject) {
          if (!(await reserveMandateSubject(tx, locked.id, mandate.issuer, mandate.subject, now))) {
            return done(await finishRejected(tx, ctx, m, locked, paymentHash, body, ['MANDATE_REPLAY'], undefined, tierNow, mandate, 'replay_attempt'));
          }
        }
        gate = gateVerdict(locked, mandate, reputation, inputs, body);
        // Checked where the reservation used to be taken: a mandate rejection above wins over a replay.
        if (proof) checkNonceHolder(locked, inputs.nonceHolder);
      }
      locked.policyVersion = gate.policyVersion;
      locked.policyHash = gate.policyHash;
      locked.payment = body.payment as Record<string, unknown>;
      locked.paymentError = null;

      if (!approved) {
        locked.verdict = gate.verdict;
        if (gate.verdict.decision === 'reject') {
          return done(await finishRejected(tx, ctx, m, locked, paymentHash, body, gate.verdict.reasonCodes, undefined, gate.verdict.tier, mandate, 'rejected', gate.verdict));
        }
        if (gate.verdict.decision === 'hold') return done(await finishHeld(tx, ctx, m, locked, paymentHash, gate, baseUrl));
      }
      return beginCapture(tx, services, m, locked, { paymentHash, gate, proof, facilitator, returnState: approved ? 'approved' : 'awaiting_payment' });
    });
  } catch (err) {
    if (err instanceof CaptureFailure) {
      const outcome = err.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid';
      await em.fork().transactional((tx) => applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, outcome, services.now()));
      return paymentInvalid(err.code, err.human);
    }
    throw err;
  }
  if (phase1.kind === 'done') return phase1.result;
  return settleResultOf(await driveAttempt(services, phase1.attemptId, phase1.proof, phase1.facilitator, { merchant: m, session: phase1.session }), s);
}

function settleResultOf(outcome: AttemptOutcome, s: Pick<SessionRow, 'pathPrefix' | 'id'>): SettleResult {
  if (outcome.kind === 'accepted') return outcome.result;
  if (outcome.kind === 'pending') return settlementPending(s);
  return paymentInvalid(outcome.code, outcome.human);
}

const nonceKeyOf = (proof: PaymentProof): NonceKey => ({
  chain: proof.chain,
  payer: proof.authorization.from.toLowerCase(),
  nonce: proof.authorization.nonce.toLowerCase(),
});

/** Replay reservation of the authorization: one session per (chain, payer, nonce), by primary key. */
async function reserveNonce(tx: Em, now: Date, s: SessionRow, proof: PaymentProof) {
  checkNonceHolder(s, await reservePaymentNonce(tx, s.id, nonceKeyOf(proof), now));
}

function checkNonceHolder(s: SessionRow, holder: string | null | undefined) {
  // A held session approved again keeps its own reservation; anyone else's is a replay.
  if (holder === s.id) return;
  // Roll back the mandate reservation too, but keep the reputation penalty.
  throw new CaptureFailure('NONCE_ALREADY_USED', humanOf('NONCE_ALREADY_USED'));
}

/** The verdict on the gate's inputs (read by readGateInputs), with the inputs the receipt fingerprints. */
function gateVerdict(s: SessionRow, mandate: MandateResult, reputation: Reputation, inputs: GateInputs, body: SettleBody): GateContext {
  const { velocity, policy: policyRow } = inputs;
  const policy = resolvePolicy(policyRow?.body);
  const verdict = evaluatePolicy({
    policy,
    total: s.total,
    currency: s.currency,
    rail: s.rail,
    agentId: s.agentId,
    mandate,
    reputation,
    velocity,
    intent: s.buyerIntent ?? null,
  });
  const hash = policyRow?.hash ?? policyHash({});
  return {
    mandate,
    verdict,
    policyVersion: policyRow?.version ?? 0,
    policyHash: hash,
    fingerprintInputs: {
      sessionId: s.id,
      lines: s.lines.map((l) => ({ sku: l.sku, qty: l.qty, unitPrice: l.unitPrice })),
      total: totalOf(s),
      rail: s.rail,
      payment: body.payment,
      mandate: { type: mandate.type, ref: mandate.ref },
      reputation,
      velocity,
      policyHash: hash,
    },
  };
}

/**
 * The accept branch of phase 1. The mock rail and an in-process facilitator settle here, in
 * this transaction (nothing outside is involved, so no second transaction is needed); any
 * other facilitator gets a durable attempt and the session goes `settling`.
 */
async function beginCapture(
  tx: Em,
  services: Services,
  m: MerchantRow,
  s: SessionRow,
  input: { paymentHash: string; gate: GateContext; proof: PaymentProof | null; facilitator: Facilitator | null; returnState: ReturnState },
): Promise<Phase1> {
  const now = services.now();
  const { proof, facilitator } = input;
  s.gate = input.gate as unknown as Record<string, unknown>;
  const opening = { session: s, facilitator, rail: s.rail, proof, paymentHash: input.paymentHash, returnState: input.returnState, now };
  if (!facilitator || facilitator.inProcess) {
    const attempt = attemptFields(services, opening);
    let reference: string;
    if (!facilitator) {
      reference = settleMockRail().reference;
    } else {
      const settled = await facilitator.settle(proof!, { nowSec: unixSeconds(now), waitMs: services.config.SVC_SETTLE_WAIT_MS, recordBroadcast: async () => undefined });
      if (settled.status === 'failed') throw new CaptureFailure(settled.code, settled.human);
      if (settled.status !== 'settled') throw new CaptureFailure('CAPTURE_FAILED', 'The in-process facilitator did not settle.');
      reference = settled.reference;
    }
    markSettled(attempt, reference, now);
    if (!s.orderId) {
      // Inserted already settled, with the order, the receipt, the session, the events and the
      // reputation deltas: one statement in this transaction (nothing outside was involved).
      // The unit of work then takes the session as written, so the commit does not write it again.
      const done = await writeAcceptedFresh(tx, services, m, s, { attempt: { insert: attempt }, paymentHash: input.paymentHash, gate: input.gate, reference, now });
      if (!done) throw new Error(`settlement attempt ${attempt.id} was not written`);
      tx.getUnitOfWork().merge(s);
      return { kind: 'done', result: done.result };
    }
    // An approved hold's order exists: updated in writeAccepted's one flush, with the attempt inserted settled.
    tx.create(SettlementAttemptEntity, attempt);
    const result = await writeAccepted(tx, services, m, s, { paymentHash: input.paymentHash, gate: input.gate, reference, attemptId: attempt.id });
    return { kind: 'done', result };
  }
  s.state = 'settling';
  s.settlePaymentHash = input.paymentHash;
  // One statement: the attempt and the session's phase-1 columns. The unit of work then takes
  // the session as written, so the commit does not write it again.
  const attempt = attemptFields(services, opening);
  try {
    await insertAttemptSettling(tx, attempt, s);
  } catch (err) {
    // Another session's attempt holds this authorization, settled or in flight (the unique index
    // settlement_attempts_authorization), though no replay reservation stopped this one: the
    // transfer is taken, whatever released the reservation.
    if (err instanceof UniqueConstraintViolationException && String(err.message).includes('settlement_attempts_authorization')) {
      throw new CaptureFailure('NONCE_ALREADY_USED', humanOf('NONCE_ALREADY_USED'));
    }
    throw err;
  }
  tx.getUnitOfWork().merge(s);
  return { kind: 'drive', attemptId: attempt.id, proof: proof!, facilitator, session: s };
}

async function recordPaymentInvalid(em: Em, now: Date, s: SessionRow, result: SettleResult): Promise<SettleResult> {
  await em.fork().transactional((tx) => applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'payment_invalid', now));
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
  tier: TrustTier,
  mandate: MandateResult,
  outcome: 'rejected' | 'replay_attempt',
  verdict?: Verdict,
): Promise<SettleResult> {
  // Nothing is captured on a reject, so the authorization nonce and mandate are released.
  await releaseReservations(tx, s.id);
  const now = ctx.services.now();
  s.state = 'rejected';
  s.settledAt = now;
  s.payment = body.payment as Record<string, unknown>;
  s.verdict = verdict ?? { decision: 'reject', tier, reasonCodes: codes, signals: { mandateType: mandate.type } };
  const order = newOrder(tx, now, m, s, 'reject', tier, { ...mandate, ref: mandate.ok ? mandate.ref : null });
  s.orderId = order.id;
  await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, outcome, now);
  const result = rejected(codes, human ?? (codes.length > 1 ? `Rejected by the gate: ${codes.join(', ')}.` : undefined));
  storeSettleResult(s, paymentHash, result);
  await tx.flush();
  await ctx.services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: presentOrderEvent(order), now });
  return result;
}

async function releaseReservations(tx: Em, sessionId: string) {
  await releasePaymentNonces(tx, sessionId);
  await releaseMandateSubjects(tx, sessionId);
}

async function finishHeld(tx: Em, ctx: Ctx, m: MerchantRow, s: SessionRow, paymentHash: string, gate: GateContext, baseUrl: string): Promise<SettleResult> {
  const now = ctx.services.now();
  s.state = 'held';
  s.settledAt = now;
  s.holdExpiresAt = new Date(now.getTime() + HOLD_REVIEW_SECONDS * 1000);
  s.gate = gate as unknown as Record<string, unknown>;
  const order = newOrder(tx, now, m, s, 'hold', gate.verdict.tier, gate.mandate);
  s.orderId = order.id;
  await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'held', now);
  const result: SettleResult = {
    status: 202,
    body: {
      status: 'hold',
      review_url: reviewUrl(baseUrl, s),
      reason_codes: gate.verdict.reasonCodes,
      error_human: 'The order is held for merchant review; poll the session for the outcome.',
      next: pollCall(s.pathPrefix, s.id),
    },
  };
  storeSettleResult(s, paymentHash, result);
  await tx.flush();
  await ctx.services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.held', object: presentOrderEvent(order), now });
  return result;
}

/**
 * Rejects a held or approved session (merchant decline, lapsed review window, lapsed
 * re-authorization), in the caller's transaction with the session row locked.
 */
export async function rejectHeld(tx: Em, services: Pick<Services, 'now' | 'events'>, m: MerchantRow, s: SessionRow, code: ReasonCode, opts: { penalize: boolean }) {
  await releaseReservations(tx, s.id);
  const order = s.orderId ? await tx.findOne(OrderEntity, { id: s.orderId }) : null;
  const now = services.now();
  s.state = 'rejected';
  s.settledAt = now;
  s.gate = null;
  s.verdict = { ...(s.verdict ?? { tier: order?.trustTier ?? 'cautious', signals: {} }), decision: 'reject', reasonCodes: [code] } as SessionRow['verdict'];
  if (order) order.decision = 'reject';
  if (opts.penalize) await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, 'rejected', now);
  if (s.settlePaymentHash) storeSettleResult(s, s.settlePaymentHash, rejected([code]));
  await tx.flush();
  if (order) await services.events.record(tx, { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, type: 'order.rejected', object: presentOrderEvent(order), now });
}

/** The review's outcome, with the bodies of the contract's approve and decline responses. */
export type HoldResolution =
  | { kind: 'approved'; status: 200; body: ServerInferResponseBody<typeof contract.sessions.approve, 200> }
  | { kind: 'approval_pending'; status: 202; body: ServerInferResponseBody<typeof contract.sessions.approve, 202> }
  | { kind: 'declined'; body: ServerInferResponseBody<typeof contract.sessions.decline, 200> };

type ApprovalPhase1 =
  | { kind: 'done'; resolution: HoldResolution }
  | { kind: 'expired' }
  | { kind: 'drive'; attemptId: string; proof: PaymentProof; facilitator: Facilitator };

/**
 * Merchant review. Decline rejects. Approve captures the held authorization through the
 * settlement engine; when that authorization no longer has APPROVAL_MIN_VALIDITY_SECONDS
 * left, the session becomes `approved` and the agent signs a fresh one (docs/settlement.md).
 */
export async function resolveHold(ctx: Ctx, m: MerchantRow, sessionId: string, action: 'approve' | 'decline'): Promise<HoldResolution> {
  const { em, services } = ctx;
  const s = await findSession(em, m, sessionId);
  let phase1: ApprovalPhase1;
  try {
    const review = async (tx: Em): Promise<ApprovalPhase1> => {
      const locked = await tx.findOneOrFail(CheckoutSessionEntity, { id: s.id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
      if (locked.state !== 'held') throw new ApiError('SESSION_NOT_HELD', `The session is ${locked.state}, not held for review.`);
      const now = services.now();
      const expired = !!locked.holdExpiresAt && now > locked.holdExpiresAt;
      if (action === 'decline' || expired) {
        await rejectHeld(tx, services, m, locked, expired ? 'REVIEW_WINDOW_EXPIRED' : 'MERCHANT_DECLINED', { penalize: true });
        if (expired && action === 'approve') return { kind: 'expired' };
        return { kind: 'done', resolution: { kind: 'declined', body: { status: 'rejected', session_id: locked.id, order_id: locked.orderId ?? null } } };
      }
      const held = locked.gate as unknown as GateContext;
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
        if (p.authorization.validBefore < unixSeconds(now) + MIN_VALIDITY_SECONDS + APPROVAL_MIN_VALIDITY_SECONDS) {
          return { kind: 'done', resolution: await askForReauthorization(tx, services, locked, gate) };
        }
        // Canonical form (v 27/28, low s) as verified when the agent settled.
        const verified = await facilitator.verify(proof, unixSeconds(now));
        if (!verified.ok) throw new CaptureFailure(verified.code, verified.human);
        proof = verified.proof;
        await reserveNonce(tx, now, locked, proof);
      }
      const began = await beginCapture(tx, services, m, locked, { paymentHash: locked.settlePaymentHash ?? '', gate, proof, facilitator, returnState: 'held' });
      if (began.kind === 'drive') return began;
      const result = began.result as AcceptedResult;
      return { kind: 'done', resolution: { kind: 'approved', status: 200, body: result.body } };
    };
    phase1 = await em.transactional(async (tx) => answerReview(ctx, tx, s, await review(tx)));
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
async function answerReview(ctx: Ctx, tx: Em, s: SessionRow, phase1: ApprovalPhase1): Promise<ApprovalPhase1> {
  if (phase1.kind === 'done') {
    const r = phase1.resolution;
    await respondIn(ctx, tx, r.kind === 'approval_pending' ? 202 : 200, r.body);
  } else if (phase1.kind === 'drive') {
    await ctx.idempotency?.completeIn(tx, 202, settlementPendingBody(s), { provisional: true });
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
async function askForReauthorization(tx: Em, services: Services, s: SessionRow, gate: GateContext): Promise<HoldResolution> {
  const now = services.now();
  await releasePaymentNonces(tx, s.id);
  s.state = 'approved';
  s.gate = gate as unknown as Record<string, unknown>;
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
