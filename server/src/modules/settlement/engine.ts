import { unixSeconds } from '../../lib/time.js';
import type { ReasonCode } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import type { BroadcastRecord, Facilitator, PaymentProof, SettleOutcome } from '../../rails/types.js';
import type { Services } from '../../http/context.js';
import { lockSessionRow, releaseMandateSubjects, releasePaymentNonces, type SessionRow } from '../checkout/index.js';
import { findMerchantByIdOrFail, loadMerchantById } from '../merchants/index.js';
import type { SettleMerchant } from '../merchants/index.js';
import { applyOutcome } from '../reputation/index.js';
import { writeAccepted, writeAcceptedFresh, type AcceptedResult } from './accepted.js';
import { attemptTransactions, extendPendingLease, insertSettlementTransaction, lockAttemptRow, pendingAttemptSession } from './store.js';
import type { AttemptRow, ReturnState } from './entity.js';
import { storedSettleBody } from './outcome.js';

/**
 * The settlement engine (docs/settlement.md). Phase 1 (the gate's transaction) writes a
 * durable attempt (`attemptFields`, written by store.ts `insertAttemptSettling`); phase 2
 * (`driveAttempt`) calls the facilitator with no transaction open, storing every transaction
 * before it is sent; phase 3 (`resolveAttempt`) writes the order in one statement or releases
 * the reservations in one short transaction. Whatever phase 2 does not resolve, the
 * reconciler (./reconciler.ts) finishes by reading the chain.
 */

/** How the attempt ended for the caller that drove it. */
export type AttemptOutcome =
  | { kind: 'accepted'; result: AcceptedResult }
  | { kind: 'pending'; attemptId: string }
  | { kind: 'failed'; code: ReasonCode; human: string; returnState: ReturnState };

/** A lease past the facilitator's bound: the reconciler leaves an attempt alone while its driver may still run. */
const LEASE_MARGIN_MS = 5_000;
/** After phase 2 answers `pending`, the reconciler may look at the attempt this soon. */
const PENDING_RECHECK_MS = 1_000;

/** A new attempt's fields (`pending`), for a statement that inserts it (store.ts `insertAttemptSettling`, `writeAcceptedAttempt`) or the unit of work. */
export function attemptFields(
  services: Pick<Services, 'config'>,
  input: {
    session: SessionRow;
    facilitator: Facilitator | null;
    rail: string;
    proof: PaymentProof | null;
    paymentHash: string;
    returnState: ReturnState;
    now: Date;
  },
): AttemptRow {
  const { session: s, proof, now } = input;
  return {
    id: newId('sat'),
    sessionId: s.id,
    merchantId: s.merchantId,
    livemode: s.livemode,
    returnState: input.returnState,
    rail: input.rail,
    facilitator: input.facilitator?.name ?? input.rail,
    chain: proof?.chain ?? null,
    payer: proof ? proof.authorization.from.toLowerCase() : null,
    nonce: proof ? proof.authorization.nonce.toLowerCase() : null,
    amountBaseUnits: proof?.amountBaseUnits ?? null,
    proof,
    paymentHash: input.paymentHash,
    status: 'pending',
    reference: null,
    failureCode: null,
    failureHuman: null,
    leaseUntil: new Date(now.getTime() + services.config.SVC_SETTLE_WAIT_MS + LEASE_MARGIN_MS),
    createdAt: now,
    resolvedAt: null,
  };
}

/** Marks an attempt settled in the caller's transaction (before the order that references it). */
export function markSettled(a: AttemptRow, reference: string, now: Date) {
  a.status = 'settled';
  a.reference = reference;
  a.resolvedAt = now;
}

/** Stored before the facilitator sends it, by one statement of its own (never inside a transaction with the send). */
async function recordBroadcast(services: Services, attemptId: string, rec: BroadcastRecord): Promise<void> {
  await insertSettlementTransaction(services.orm.em.fork(), {
    txHash: rec.txHash.toLowerCase(),
    attemptId,
    rawTx: rec.rawTx,
    relayer: rec.relayer,
    relayerNonce: rec.relayerNonce,
    createdAt: services.now(),
  });
}

export async function broadcastsOf(em: Em, attemptId: string): Promise<BroadcastRecord[]> {
  const rows = await attemptTransactions(em, attemptId);
  return rows.map((r) => ({ txHash: r.txHash as `0x${string}`, rawTx: (r.rawTx ?? null) as `0x${string}` | null, relayer: r.relayer ?? null, relayerNonce: r.relayerNonce ?? null }));
}

/**
 * Phase 2 and 3 for an attempt phase 1 just committed. A facilitator throws only when nothing
 * was sent (an unreachable node, a remote facilitator that refused the request): with no
 * transaction stored the attempt fails and the error (503) reaches the caller; with one
 * stored it is `pending` and the reconciler reads the chain. An uncertain send (a timeout
 * after the request went out) is not a throw but `pending`.
 */
export async function driveAttempt(
  services: Services,
  attemptId: string,
  proof: PaymentProof,
  facilitator: Facilitator,
  /**
   * What the caller has in hand (the settle request), so phase 3 need not read it again: the
   * attempt's merchant, and its session as phase 1 committed it (`settling`; nothing but a
   * resolver, which must win the attempt first, changes it after).
   */
  known: { merchant?: SettleMerchant; session?: SessionRow } = {},
): Promise<AttemptOutcome> {
  const settled = await settleRecordingBroadcasts(services, facilitator, proof, (rec) => recordBroadcast(services, attemptId, rec), { attempt: attemptId });
  if ('nothingSent' in settled) {
    const err = settled.nothingSent;
    const code: ReasonCode = err instanceof ApiError ? err.codes[0]! : 'FACILITATOR_UNAVAILABLE';
    await resolveAttempt(services, attemptId, { status: 'failed', code, human: err instanceof ApiError ? err.human : 'The facilitator could not be reached.' }, { penalize: false });
    throw err instanceof ApiError ? err : new ApiError('FACILITATOR_UNAVAILABLE', 'The facilitator could not be reached; nothing was sent. Retry the settle.');
  }
  return resolveAttempt(services, attemptId, settled.outcome, known);
}

/**
 * Phase 2's call, for a payment or a refund: the facilitator's settle, each transaction it is
 * about to send stored first by `record`. A throw after a stored broadcast reads as pending
 * (something may be on its way: the reconciler reads the chain); a throw before anything was
 * sent comes back as `nothingSent`, for the caller's compensation.
 */
export async function settleRecordingBroadcasts(
  services: Services,
  facilitator: Facilitator,
  proof: PaymentProof,
  record: (rec: BroadcastRecord) => Promise<void>,
  logFields: Record<string, string>,
): Promise<{ outcome: SettleOutcome } | { nothingSent: unknown }> {
  let recorded = 0;
  try {
    const outcome = await facilitator.settle(proof, {
      nowSec: unixSeconds(services.now()),
      waitMs: services.config.SVC_SETTLE_WAIT_MS,
      recordBroadcast: async (rec) => {
        await record(rec);
        recorded += 1;
      },
    });
    return { outcome };
  } catch (err) {
    services.log.warn({ ...logFields, err: err instanceof Error ? err.message : String(err), recorded }, 'facilitator settle failed');
    return recorded > 0 ? { outcome: { status: 'pending', reference: null } } : { nothingSent: err };
  }
}

/**
 * Phase 3: writes the outcome once. Whoever resolves an attempt first (the request that drove
 * it or the reconciler) wins; the other sees it resolved and reports the stored outcome.
 */
export async function resolveAttempt(
  services: Services,
  attemptId: string,
  outcome: SettleOutcome,
  opts: { penalize?: boolean; merchant?: SettleMerchant; session?: SessionRow } = {},
): Promise<AttemptOutcome> {
  const now = services.now();
  if (outcome.status === 'pending') {
    await services.orm.em.fork().transactional(async (tx) => {
      await extendPendingLease(tx, attemptId, new Date(now.getTime() + PENDING_RECHECK_MS));
    });
    return { kind: 'pending', attemptId };
  }
  if (outcome.status === 'settled') {
    const accepted = await acceptInOneStatement(services, attemptId, outcome.reference, now, opts);
    if (accepted) return accepted;
  }
  return services.orm.em.fork().transactional(async (tx) => {
    // The attempt, then its session, each locked (the order every resolver takes), by prepared statements.
    const a = found(await lockAttemptRow(tx, attemptId), 'settlement attempt', attemptId);
    const s = found(await lockSessionRow(tx, a.sessionId), 'checkout session', a.sessionId);
    if (a.status !== 'pending') return storedOutcome(a, s);
    if (outcome.status === 'settled') {
      const m = opts.merchant?.id === a.merchantId ? opts.merchant : await findMerchantByIdOrFail(tx, a.merchantId);
      // Flushed with the order (writeAccepted): their link is checked at commit (orders_settlement_attempt_fk is deferred).
      markSettled(a, outcome.reference, now);
      const result = await writeAccepted(tx, services, m, s, {
        paymentHash: a.paymentHash,
        gate: s.gate!,
        reference: outcome.reference,
        attemptId: a.id,
      });
      return { kind: 'accepted' as const, result };
    }
    a.status = 'failed';
    a.failureCode = outcome.code;
    a.failureHuman = outcome.human;
    a.resolvedAt = now;
    await releaseAttempt(tx, a, s);
    s.paymentError = { reasonCodes: [outcome.code], errorHuman: outcome.human };
    if (opts.penalize !== false && a.returnState !== 'held') {
      await applyOutcome(tx, s.livemode, s.id, 'agent', s.agentId, outcome.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid', now);
    }
    await tx.flush();
    return { kind: 'failed' as const, code: outcome.code, human: outcome.human, returnState: a.returnState };
  });
}

/**
 * Phase 3 of a settled attempt as one statement (store.ts `writeAcceptedAttempt`), computed from
 * the attempt's session as committed: the usual case, a session with no order yet. Null when the
 * session holds an order (an approved hold's, updated by the transaction in resolveAttempt) or
 * when the attempt is no longer pending; that transaction then reports what was stored.
 */
async function acceptInOneStatement(
  services: Services,
  attemptId: string,
  reference: string,
  now: Date,
  known: { merchant?: SettleMerchant; session?: SessionRow },
): Promise<AttemptOutcome | null> {
  const em = services.orm.em.fork();
  let s: SessionRow;
  let paymentHash: string;
  if (known.session?.state === 'settling' && known.session.settlePaymentHash) {
    // phase 1 wrote the payment's hash on the session beside the attempt
    s = known.session;
    paymentHash = known.session.settlePaymentHash;
  } else {
    const pending = await pendingAttemptSession(em, attemptId);
    if (!pending) return null;
    s = pending.session;
    paymentHash = pending.paymentHash;
  }
  if (s.orderId) return null;
  const m = known.merchant?.id === s.merchantId ? known.merchant : await loadMerchantById(em, s.merchantId);
  if (!m) throw new Error(`merchant ${s.merchantId} not found`);
  const done = await writeAcceptedFresh(em, services, m, s, {
    attempt: { pendingId: attemptId },
    paymentHash,
    gate: s.gate!,
    reference,
    now,
  });
  if (!done) return null;
  services.wake.committedOutsideTransaction();
  return { kind: 'accepted', result: done.result };
}

function found<R>(row: R | undefined, what: string, id: string): R {
  if (!row) throw new Error(`${what} ${id} not found`);
  return row;
}

/** Nothing moved: free the authorization's nonce (and, for a fresh settle, the mandate) and hand the session back. */
async function releaseAttempt(tx: Em, a: AttemptRow, s: SessionRow) {
  if (a.nonce) {
    await releasePaymentNonces(tx, s.id, { chain: a.chain!, payer: a.payer!, nonce: a.nonce });
  }
  if (a.returnState === 'awaiting_payment') {
    await releaseMandateSubjects(tx, s.id);
    s.gate = null;
  }
  s.state = a.returnState;
}

function storedOutcome(a: AttemptRow, s: SessionRow): AttemptOutcome {
  if (a.status === 'settled' && s.settleStatus === 200 && s.settleResponse) {
    return { kind: 'accepted', result: { status: 200, body: storedSettleBody(s) as AcceptedResult['body'] } };
  }
  return { kind: 'failed', code: (a.failureCode ?? 'CAPTURE_FAILED') as ReasonCode, human: a.failureHuman ?? 'The payment did not settle.', returnState: a.returnState };
}
