import { resolvePolicy } from '@svc/contract';
import type { Hex } from 'viem';
import { bareTransaction } from '../../db/bare-transaction.js';
import type { Em } from '../../db/orm.js';
import type { BareTx } from '../../db/sql.js';
import type { Ctx } from '../../http/context.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import type { Authorization } from '../../lib/eip3009.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { outboundRules } from '../../lib/ssrf.js';
import { facilitatorFor } from '../../rails/index.js';
import type { Facilitator, PaymentProof } from '../../rails/types.js';
import { adoptSession, expireSession, findSession, lockSessionForGate, lockSettleRow, readGateInputs, readSettleRow, reserveMandateSubject, sessionStateAt, totalOf, type GateInputs, type SessionRow } from '../checkout/index.js';
import { evaluatePolicy, mandateVerifiableOffline, trustTier, verifyMandate, type GateContext, type MandateContext, type MandateResult } from '../gate/index.js';
import type { SettleMerchant } from '../merchants/index.js';
import { policyHash } from '../policy/index.js';
import { applyOutcome, reputationOf, subjectKey, type Reputation } from '../reputation/index.js';
import { acceptInProcessFresh, beginCapture, CaptureFailure, checkNonceHolder, nonceKeyOf, reserveNonce, type CaptureBegun } from './capture.js';
import { driveAttempt, type AttemptOutcome } from './engine.js';
import { finishHeld, finishRejected, recordPaymentInvalid, type RejectInput } from './finish.js';
import { paymentInvalid, rejected, replayOrConflict, settlementPending, TERMINAL, whileSettling, type SettlePayment, type SettleResult } from './outcome.js';

/**
 * POST settle, the payment workflow (docs/settlement.md): `replayBeforeGate` (idempotent
 * replay, expiry) -> `checkPayment` (the proof, before anything is reserved) -> `mandateOf`
 * -> `gatePhase` (phase 1, one transaction: row lock, replay reservations, reputation, verdict,
 * and on accept a durable settlement attempt) -> engine.ts `driveAttempt` (phase 2, the
 * facilitator with no transaction open; phase 3, the order, receipt and events). An in-process
 * facilitator (the test-mode mock) settles inside phase 1.
 */

/**
 * The merchant a settle pays: known already (the x402 paid resource, which quoted it), or the
 * reference of the URL (`mrch_` id or slug), resolved by the settle's own first statement
 * (checkout/store.ts `lockSettleRow`). `resolve` reads it the agent routes' way, for the answer
 * when the session is not that merchant's (404 for the merchant, else for the session); `seen`
 * hears the merchant the settle read (the agent read cache's config version).
 */
export type SettleMerchantRef = { ref: string; resolve: () => Promise<SettleMerchant>; seen?: (m: SettleMerchant) => void };

/** One settle: the merchant and session it pays, the canonical payment, and where hosted links point. */
export type SettleInput = { ctx: Ctx; merchant: SettleMerchant | SettleMerchantRef; sessionId: string; payment: SettlePayment; baseUrl: string };

/** Every transport (JSON settle, x402 headers, the paid resource) settles here: one place to count outcomes. */
export async function settleSession(input: SettleInput): Promise<SettleResult> {
  const { metrics } = input.ctx.services;
  try {
    const result = await settleOnce(input);
    metrics.observeSettle(result.body.status, ('reason_codes' in result.body ? result.body.reason_codes[0] : undefined) ?? 'NONE');
    return result;
  } catch (err) {
    metrics.observeSettle('error', err instanceof ApiError ? (err.codes[0] ?? 'INTERNAL') : 'INTERNAL');
    throw err;
  }
}

/**
 * The mode each merchant reference named when last read (services.caches.settleRefModes, per
 * process; a merchant's mode never changes, a slug's may, when its live merchant publishes). A
 * hint only: it picks the path a settle tries first, and the statement that reads the merchant decides.
 */
export type RefModes = Map<string, boolean>;
const REF_MODES_MAX = 4096;
const refKey = (ref: string) => (hasPrefix(ref, 'mrch') ? ref : ref.toLowerCase());
function rememberMode(refModes: RefModes, ref: string, livemode: boolean) {
  const key = refKey(ref);
  if (refModes.get(key) === livemode) return;
  if (refModes.size >= REF_MODES_MAX) refModes.delete(refModes.keys().next().value!);
  refModes.set(key, livemode);
}

const isRef = (m: SettleInput['merchant']): m is SettleMerchantRef => 'ref' in m;
const lockRefOf = (m: SettleInput['merchant']) => (!isRef(m) ? { id: m.id } : hasPrefix(m.ref, 'mrch') ? { id: m.ref } : { slug: m.ref.toLowerCase() });

/** The session and its merchant, read before the gate's transaction (the path that needs the outside first). */
type Read = { session: SessionRow; merchant: SettleMerchant };

async function settleOnce(input: SettleInput): Promise<SettleResult> {
  const { ctx, payment } = input;
  // (not ctx.em here: the request's entity manager is forked on first use, and the one transaction needs none)
  const { services } = ctx;
  const now = services.now();
  const paymentHash = canonicalHash(payment);
  const livemode = isRef(input.merchant) ? services.caches.settleRefModes.get(refKey(input.merchant.ref)) : input.merchant.livemode;

  // Test mode: everything in one transaction (settleInOneTransaction). It hands back what it read
  // when the settle needs the outside first (a live facilitator's verify, an issuer's keys to
  // fetch) or an answer it does not give itself (an expired session, an unknown one).
  let read: Read | null = null;
  if (livemode === false || (livemode === undefined && 'mock' in payment)) {
    const one = await settleInOneTransaction(input, paymentHash, now);
    if (one.kind === 'result') return one.result;
    read = one.read;
  }
  if (!read) read = await readBeforeGate(input);
  const { session, merchant: m } = read;
  if (isRef(input.merchant)) input.merchant.seen?.(m);

  const { em } = ctx;
  const replay = await replayBeforeGate({ em, session, paymentHash, now });
  if (replay) return replay;
  const approved = session.state === 'approved';

  const checked = await checkPayment({ ctx, merchant: m, session, payment, now });
  if (checked.kind === 'refused') return refusedPayment(ctx, session, checked, now);

  const mandate = await mandateOf({ ctx, merchant: m, session, approved, now });
  if (mandate.present && !mandate.ok && mandate.code === 'MANDATE_ISSUER_UNAVAILABLE') {
    // The issuer's keys could not be fetched: not the agent's fault, so not terminal.
    return rejected(['MANDATE_ISSUER_UNAVAILABLE'], mandate.human);
  }

  const begun = await gateTransaction(ctx, session, () =>
    em.transactional((tx) => gatePhase({ ...input, merchant: m, tx, session, paymentHash, approved, mandate, proof: checked.proof, facilitator: checked.facilitator, now })),
  );
  if (begun.kind === 'done') return begun.result;
  return settleResultOf(await driveAttempt(services, begun.attemptId, begun.proof, begun.facilitator, { merchant: m, session: begun.session }), session);
}

/** Phase 1's transaction, with a payment failure's reputation penalty after it rolled back. */
async function gateTransaction(ctx: Ctx, s: Pick<SessionRow, 'livemode' | 'id' | 'agentId'>, run: () => Promise<CaptureBegun>): Promise<CaptureBegun> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof CaptureFailure) {
      const outcome = err.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid';
      await ctx.em.fork().transactional((tx) => applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, outcome, ctx.services.now()));
      return { kind: 'done', result: paymentInvalid(err.code, err.human) };
    }
    throw err;
  }
}

/** The session and merchant before the gate's transaction: one statement for a merchant reference, else the session read. */
async function readBeforeGate(input: SettleInput): Promise<Read> {
  const { ctx, merchant } = input;
  if (!isRef(merchant)) return { session: await findSession(ctx.em, merchant, input.sessionId), merchant };
  const row = await readSettleRow(ctx.em, input.sessionId, lockRefOf(merchant));
  if (!row || !row.byRef) return notThisMerchants(merchant);
  rememberMode(ctx.services.caches.settleRefModes, merchant.ref, row.merchant.livemode);
  return { session: row.session, merchant: row.merchant };
}

/** The session is not the referenced merchant's: the merchant's 404 when the reference names none, else the session's. */
async function notThisMerchants(merchant: SettleMerchantRef): Promise<never> {
  await merchant.resolve();
  throw new ApiError('SESSION_NOT_FOUND');
}

type OneTransaction = { kind: 'result'; result: SettleResult } | { kind: 'outside'; read: Read | null };

/**
 * A test-mode settle in one transaction (docs/settlement.md, "Statement budget"): the lock
 * statement reads the session, its receipt and its merchant and takes the gate lock; the proof
 * (an in-process facilitator's check, no I/O) and a mandate whose issuer keys are cached are
 * checked under the lock, before the gate reserves anything; then the gate's statement and the
 * accept's one write. Whatever needs the outside (a live merchant's facilitator, an issuer's keys
 * to fetch) or an answer given elsewhere (no such session, an expired one) leaves the transaction
 * with nothing written, handing back what it read for the path that does that first.
 */
async function settleInOneTransaction(input: SettleInput, paymentHash: string, now: Date): Promise<OneTransaction> {
  const { ctx, payment } = input;
  const { services } = ctx;
  // What the transaction saw, for the answers given after it ended.
  const seen: { session?: SessionRow; refused?: Extract<CheckedPayment, { kind: 'refused' }> } = {};
  let begun: CaptureBegun | OneTransaction;
  try {
    begun = await bareTransaction(services.orm, async (tx): Promise<CaptureBegun | OneTransaction> => {
      const locked = await lockSettleRow(tx, input.sessionId, lockRefOf(input.merchant));
      if (!locked || !locked.byRef) return { kind: 'outside', read: null };
      const { session: s, merchant: m } = locked;
      seen.session = s;
      if (isRef(input.merchant)) {
        rememberMode(services.caches.settleRefModes, input.merchant.ref, m.livemode);
        input.merchant.seen?.(m);
      }
      const read = { session: s, merchant: m };
      if (TERMINAL.has(s.state)) return { kind: 'done', result: replayOrConflict(s, paymentHash) };
      if (s.state === 'settling') return { kind: 'done', result: whileSettling(s, paymentHash) };
      const facilitator = s.rail === 'x402' ? facilitatorFor(services.facilitators, m.livemode) : null;
      if (sessionStateAt(s, now) === 'expired' || m.livemode || (facilitator && !facilitator.inProcess)) return { kind: 'outside', read };
      // An approved hold's order is written through the unit of work: gatePhase's path takes it.
      if (s.state === 'approved' || !mandateVerifiableOffline(s.mandate, mandateContext(ctx, m, s, now))) return { kind: 'outside', read };
      const checked = await checkPayment({ ctx, merchant: m, session: s, payment, now });
      if (checked.kind === 'refused') {
        seen.refused = checked;
        return { kind: 'outside', read: null };
      }
      const mandate = await mandateOf({ ctx, merchant: m, session: s, approved: false, now });
      return acceptPhase({ ...input, merchant: m, tx, session: s, paymentHash, mandate, proof: checked.proof, facilitator, now }, read);
    });
  } catch (err) {
    if (err instanceof HandBack) begun = { kind: 'outside', read: err.read };
    else if (!(err instanceof CaptureFailure) || !seen.session) throw err;
    else begun = await gateTransaction(ctx, seen.session, () => Promise.reject(err));
  }
  if (seen.refused) return { kind: 'result', result: await refusedPayment(ctx, seen.session!, seen.refused, now) };
  if (begun.kind === 'outside') return begun;
  if (begun.kind === 'done') return { kind: 'result', result: begun.result };
  throw new Error(`settle of ${input.sessionId}: an in-process facilitator left an attempt to drive`);
}

/** Rolls `settleInOneTransaction`'s transaction back (its reservations with it) and hands the settle to gatePhase's path. */
class HandBack extends Error {
  constructor(readonly read: Read) {
    super('the settle ends through the unit of work');
  }
}

/**
 * Phase 1 in `settleInOneTransaction`'s bare transaction, for the accept it is there for: the
 * gate's statement (its reads and the authorization's replay reservation), a mandate's subject
 * reservation, the verdict, and on accept the in-process transfer and its one write. An end
 * written through the unit of work (a rejection, a hold) rolls back and hands the settle to
 * gatePhase's path (`HandBack`), which decides it again; a replayed authorization fails the
 * capture as there (CaptureFailure).
 */
async function acceptPhase(input: Omit<GatePhaseInput, 'tx' | 'approved'> & { tx: BareTx }, read: Read): Promise<CaptureBegun> {
  const { tx, merchant: m, session: s, mandate, proof, now } = input;
  if (mandate.present && !mandate.ok) throw new HandBack(read);
  const inputs = await readGateInputs(tx, gateSubjectOf(s, m), proof ? nonceKeyOf(proof) : null, now);
  if (mandate.present && mandate.ok && mandate.issuer && mandate.subject && !(await reserveMandateSubject(tx, s.id, mandate.issuer, mandate.subject, now))) throw new HandBack(read);
  const gate = gateVerdict({ session: s, mandate, reputation: reputationOf(inputs.agentReputation), inputs, payment: input.payment });
  if (proof) checkNonceHolder(s, inputs.nonceHolder);
  if (gate.verdict.decision !== 'accept') throw new HandBack(read);
  applyGate(s, gate, input.payment);
  s.verdict = gate.verdict;
  return acceptInProcessFresh({ tx, services: input.ctx.services, merchant: m, session: s, paymentHash: input.paymentHash, gate, proof, facilitator: input.facilitator, returnState: 'awaiting_payment' });
}

/** Whose gate the gate's statement reads for (checkout/store.ts `readGateInputs`). */
const gateSubjectOf = (s: SessionRow, m: SettleMerchant) => ({ id: s.id, merchantId: s.merchantId, agentId: s.agentId, agentSubject: subjectKey(s.agentId), livemode: m.livemode, projectId: m.projectId });

/** The gate's columns on the session, as the settle's write stores them. */
function applyGate(s: SessionRow, gate: GateContext, payment: SettlePayment) {
  s.policyVersion = gate.policyVersion;
  s.policyHash = gate.policyHash;
  s.payment = payment as Record<string, unknown>;
  s.paymentError = null;
}

/** A refused proof: the answer, and the agent's reputation penalty when the refusal counts (its own transaction). */
async function refusedPayment(ctx: Ctx, s: SessionRow, refused: Extract<CheckedPayment, { kind: 'refused' }>, now: Date): Promise<SettleResult> {
  if (!refused.penalize) return refused.result;
  return recordPaymentInvalid({ em: ctx.em, now, session: s, result: refused.result });
}

/** A session the gate already decided replays (or refuses) at once; an expired one is 410 (and marked so). */
async function replayBeforeGate(input: { em: Em; session: SessionRow; paymentHash: string; now: Date }): Promise<SettleResult | null> {
  const { em, session: s, paymentHash } = input;
  if (TERMINAL.has(s.state)) return replayOrConflict(s, paymentHash);
  if (s.state === 'settling') return whileSettling(s, paymentHash);
  if (sessionStateAt(s, input.now) === 'expired') {
    if (s.state !== 'expired') await expireSession(em, s.id);
    throw new ApiError('SESSION_EXPIRED');
  }
  return null;
}

type CheckedPayment = { kind: 'checked'; proof: PaymentProof | null; facilitator: Facilitator | null } | { kind: 'refused'; result: SettleResult; penalize: boolean };

function x402Payment(payment: SettlePayment): { auth: Authorization; signature: Hex; scheme: string } | null {
  if (!('authorization' in payment)) return null;
  return { auth: payment.authorization, signature: payment.signature as Hex, scheme: payment.scheme };
}

/**
 * Proof of payment for the session's rail, checked before anything is reserved (a bad proof
 * reserves nothing). A refusal that counts against the agent's reputation says so (`penalize`):
 * the caller records it once no transaction of its own is open.
 */
async function checkPayment(input: { ctx: Ctx; merchant: SettleMerchant; session: SessionRow; payment: SettlePayment; now: Date }): Promise<CheckedPayment> {
  const { ctx, merchant: m, session: s, now } = input;
  const { services } = ctx;
  const refuse = (result: SettleResult): CheckedPayment => ({ kind: 'refused', result, penalize: true });
  const x402 = x402Payment(input.payment);
  const facilitator = s.rail === 'x402' ? facilitatorFor(services.facilitators, m.livemode) : null;
  if (s.rail === 'card') return { kind: 'refused', result: paymentInvalid('RAIL_NOT_IMPLEMENTED'), penalize: false };
  if (s.rail === 'mock') {
    if (m.livemode) throw new ApiError('TEST_MODE_RAIL_FORBIDDEN');
    if (x402) return refuse(paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the mock rail: send {"payment":{"mock":true}}.'));
    return { kind: 'checked', proof: null, facilitator };
  }
  if (!x402) return refuse(paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', 'This session is on the x402 rail: send an x402-exact payment.'));
  if (x402.scheme !== 'x402-exact') return refuse(paymentInvalid('PAYMENT_SCHEME_UNSUPPORTED', `payment.scheme must be x402-exact, got ${x402.scheme}.`));
  const verified = await facilitator!.verify(
    { chain: s.chain!, payTo: s.payTo!, amountBaseUnits: s.amountBaseUnits!, authorization: x402.auth, signature: x402.signature },
    Math.floor(now.getTime() / 1000),
  );
  if (!verified.ok) return refuse(paymentInvalid(verified.code, verified.human));
  return { kind: 'checked', proof: verified.proof, facilitator };
}

/** The mandate's verification. An approved session was gated already (the merchant approved the verdict); only the payment is new. */
async function mandateOf(input: { ctx: Ctx; merchant: SettleMerchant; session: SessionRow; approved: boolean; now: Date }): Promise<MandateResult> {
  const { ctx, merchant: m, session: s } = input;
  if (input.approved) return s.gate!.mandate;
  return verifyMandate(s.mandate, mandateContext(ctx, m, s, input.now));
}

function mandateContext(ctx: Ctx, m: SettleMerchant, s: SessionRow, now: Date): MandateContext {
  return {
    jwksUrl: m.trustedSvcJwksUrl ?? null,
    ap2Issuers: m.trustedAp2Issuers,
    lines: s.lines,
    merchantId: m.id,
    merchantDomain: m.verifiedDomain ?? null,
    total: s.total,
    currency: s.currency,
    agentId: s.agentId,
    rules: outboundRules(ctx.services.config, m.livemode),
    now,
    issuerKeys: ctx.services.caches.issuerKeys,
  };
}

type GatePhaseInput = Omit<SettleInput, 'merchant'> & {
  merchant: SettleMerchant;
  tx: Em;
  session: SessionRow;
  paymentHash: string;
  approved: boolean;
  mandate: MandateResult;
  proof: PaymentProof | null;
  facilitator: Facilitator | null;
  now: Date;
};

/**
 * Phase 1, in one transaction: the row and gate locks, the replay reservations, the verdict,
 * and its end (rejected, held, or the capture begun).
 */
async function gatePhase(input: GatePhaseInput): Promise<CaptureBegun> {
  const { tx, ctx, merchant: m, paymentHash, approved, mandate, proof, now } = input;
  const done = (result: SettleResult): CaptureBegun => ({ kind: 'done', result });
  // The row lock and, in the same statement, one gate at a time per (merchant, agent):
  // velocity and daily caps count the agent's other sessions, so a concurrent settle must
  // wait for this one to commit (row locks cover only this session).
  const s = input.session;
  const locked = await lockSessionForGate(tx, s.id, s.merchantId, s.agentId);
  if (!locked) throw new ApiError('NOT_FOUND', 'No such checkout session.');
  if (TERMINAL.has(locked.state)) return done(replayOrConflict(locked, paymentHash));
  if (locked.state === 'settling') return done(whileSettling(locked, paymentHash));
  if (locked.state !== (approved ? 'approved' : 'awaiting_payment')) throw new ApiError('SESSION_EXPIRED');
  const nonceKey = proof ? nonceKeyOf(proof) : null;
  const rejectWith = (r: Pick<RejectInput, 'codes' | 'human' | 'tier' | 'outcome' | 'verdict'>) =>
    finishRejected({ tx, ctx, merchant: m, session: adoptSession(tx, locked), paymentHash, payment: input.payment, mandate, ...r });

  let gate: GateContext;
  if (approved) {
    gate = locked.gate!;
    if (proof) await reserveNonce({ tx, now, session: locked, proof });
  } else {
    // The gate's reads and the authorization's replay reservation: one statement.
    const inputs = await readGateInputs(tx, gateSubjectOf(locked, m), nonceKey, now);
    // The merchant's project's view in its mode: the shared score plus the project's own ingest reports.
    const reputation = reputationOf(inputs.agentReputation);
    const tierNow = trustTier(mandate, reputation.known);
    if (mandate.present && !mandate.ok) {
      return done(await rejectWith({ codes: [mandate.code ?? 'MANDATE_MALFORMED'], human: mandate.human, tier: tierNow, outcome: 'rejected' }));
    }
    if (mandate.present && mandate.ok && mandate.issuer && mandate.subject) {
      if (!(await reserveMandateSubject(tx, locked.id, mandate.issuer, mandate.subject, now))) {
        return done(await rejectWith({ codes: ['MANDATE_REPLAY'], tier: tierNow, outcome: 'replay_attempt' }));
      }
    }
    gate = gateVerdict({ session: locked, mandate, reputation, inputs, payment: input.payment });
    // Checked where the reservation used to be taken: a mandate rejection above wins over a replay.
    if (proof) checkNonceHolder(locked, inputs.nonceHolder);
  }
  applyGate(locked, gate, input.payment);

  if (!approved) {
    locked.verdict = gate.verdict;
    if (gate.verdict.decision === 'reject') {
      return done(await rejectWith({ codes: gate.verdict.reasonCodes, tier: gate.verdict.tier, outcome: 'rejected', verdict: gate.verdict }));
    }
    if (gate.verdict.decision === 'hold') return done(await finishHeld({ tx, ctx, merchant: m, session: adoptSession(tx, locked), paymentHash, gate, baseUrl: input.baseUrl }));
  }
  return beginCapture({
    tx,
    services: ctx.services,
    merchant: m,
    // an approved hold's order is updated through the unit of work; a new one is written by one statement
    session: locked.orderId ? adoptSession(tx, locked) : locked,
    paymentHash,
    gate,
    proof,
    facilitator: input.facilitator,
    returnState: approved ? 'approved' : 'awaiting_payment',
  });
}

/** The verdict on the gate's inputs (read by readGateInputs), with the inputs the receipt fingerprints. */
function gateVerdict(input: { session: SessionRow; mandate: MandateResult; reputation: Reputation; inputs: GateInputs; payment: SettlePayment }): GateContext {
  const { session: s, mandate, reputation } = input;
  const { velocity, policy: policyRow } = input.inputs;
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
      payment: input.payment,
      mandate: { type: mandate.type, ref: mandate.ref },
      reputation,
      velocity,
      policyHash: hash,
    },
  };
}

/** Phase 2/3's end, as the settle route answers it. */
function settleResultOf(outcome: AttemptOutcome, s: Pick<SessionRow, 'pathPrefix' | 'id'>): SettleResult {
  if (outcome.kind === 'accepted') return outcome.result;
  if (outcome.kind === 'pending') return settlementPending(s);
  return paymentInvalid(outcome.code, outcome.human);
}
