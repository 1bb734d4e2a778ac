import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { humanOf, type ReasonCode } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { SqlOn } from '../../db/sql.js';
import type { Ctx } from '../../http/context.js';
import { settleMockRail } from '../../rails/index.js';
import type { Facilitator, PaymentProof } from '../../rails/types.js';
import { isSessionEntity, reservePaymentNonce, type NonceKey, type SessionRow } from '../checkout/index.js';
import type { SettleMerchant } from '../merchants/index.js';
import type { GateContext } from '../gate/index.js';
import { writeAccepted, writeAcceptedFresh } from './accepted.js';
import { attemptFields, markSettled } from './engine.js';
import type { AttemptRow, ReturnState } from './entity.js';
import type { SettleResult } from './outcome.js';
import { addAttempt, insertAttemptSettling } from './store.js';

/** Thrown inside a phase-1 transaction to roll it back (releasing reservations) with a 402. */
export class CaptureFailure extends Error {
  constructor(readonly code: ReasonCode, readonly human: string) {
    super(human);
  }
}

/** What phase 1 hands to phase 2: a result already final, or a committed attempt to drive. */
export type CaptureBegun = { kind: 'done'; result: SettleResult } | { kind: 'drive'; attemptId: string; proof: PaymentProof; facilitator: Facilitator; session: SessionRow };

export const nonceKeyOf = (proof: PaymentProof): NonceKey => ({
  chain: proof.chain,
  payer: proof.authorization.from.toLowerCase(),
  nonce: proof.authorization.nonce.toLowerCase(),
});

/** Replay reservation of the authorization: one session per (chain, payer, nonce), by primary key. */
export async function reserveNonce(input: { tx: Em; now: Date; session: SessionRow; proof: PaymentProof }) {
  checkNonceHolder(input.session, await reservePaymentNonce(input.tx, input.session.id, nonceKeyOf(input.proof), input.now));
}

export function checkNonceHolder(s: SessionRow, holder: string | null | undefined) {
  // A held session approved again keeps its own reservation; anyone else's is a replay.
  if (holder === s.id) return;
  // Roll back the mandate reservation too, but keep the reputation penalty.
  throw new CaptureFailure('NONCE_ALREADY_USED', humanOf('NONCE_ALREADY_USED'));
}

/** The accept branch of phase 1 (a gated settle, or an approved hold), in its transaction with the session row locked. */
export type BeginCaptureInput<Tx extends SqlOn = Em> = {
  tx: Tx;
  services: Ctx['services'];
  merchant: SettleMerchant;
  session: SessionRow;
  paymentHash: string;
  gate: GateContext;
  proof: PaymentProof | null;
  facilitator: Facilitator | null;
  returnState: ReturnState;
};

/**
 * The accept branch of phase 1. The mock rail and an in-process facilitator settle here, in
 * this transaction (nothing outside is involved, so no second transaction is needed); any
 * other facilitator gets a durable attempt and the session goes `settling`.
 */
export async function beginCapture(input: BeginCaptureInput): Promise<CaptureBegun> {
  const { tx, services, merchant: m, session: s, proof, facilitator } = input;
  if (!facilitator || facilitator.inProcess) {
    if (!s.orderId) {
      const done = await acceptInProcessFresh(input);
      // The unit of work takes the session as written, so the commit does not write it again.
      if (isSessionEntity(tx, s)) tx.getUnitOfWork().merge(s);
      return done;
    }
    // An approved hold's order exists: updated in writeAccepted's one flush, with the attempt inserted settled.
    const { attempt, reference } = await transferInProcess(input);
    addAttempt(tx, attempt);
    const result = await writeAccepted(tx, services, m, s, { paymentHash: input.paymentHash, gate: input.gate, reference, attemptId: attempt.id });
    return { kind: 'done', result };
  }
  const now = services.now();
  s.gate = input.gate;
  const opening = { session: s, facilitator, rail: s.rail, proof, paymentHash: input.paymentHash, returnState: input.returnState, now };
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
  if (isSessionEntity(tx, s)) tx.getUnitOfWork().merge(s);
  return { kind: 'drive', attemptId: attempt.id, proof: proof!, facilitator, session: s };
}

/**
 * The transfer of the mock rail or of an in-process facilitator, made in phase 1's transaction
 * (nothing outside the process is involved, so no second transaction is needed): the attempt,
 * already settled, and the transfer's reference.
 */
async function transferInProcess(input: BeginCaptureInput<SqlOn>): Promise<{ attempt: AttemptRow; reference: string; now: Date }> {
  const { services, session: s, proof, facilitator } = input;
  const now = services.now();
  s.gate = input.gate;
  const attempt = attemptFields(services, { session: s, facilitator, rail: s.rail, proof, paymentHash: input.paymentHash, returnState: input.returnState, now });
  let reference: string;
  if (!facilitator) {
    reference = settleMockRail().reference;
  } else {
    const settled = await facilitator.settle(proof!, { nowSec: Math.floor(now.getTime() / 1000), waitMs: services.config.SVC_SETTLE_WAIT_MS, recordBroadcast: async () => undefined });
    if (settled.status === 'failed') throw new CaptureFailure(settled.code, settled.human);
    if (settled.status !== 'settled') throw new CaptureFailure('CAPTURE_FAILED', 'The in-process facilitator did not settle.');
    reference = settled.reference;
  }
  markSettled(attempt, reference, now);
  return { attempt, reference, now };
}

/**
 * The accept branch of phase 1 for a session with no order yet, on the mock rail or an
 * in-process facilitator: the transfer, then the attempt inserted already settled with the
 * order, the receipt, the session, the events and the reputation deltas in one statement, on
 * the unit of work's connection or a bare transaction (settle.ts `settleInOneTransaction`).
 */
export async function acceptInProcessFresh(input: BeginCaptureInput<SqlOn>): Promise<CaptureBegun> {
  const { tx, services, merchant: m, session: s } = input;
  const { attempt, reference, now } = await transferInProcess(input);
  const done = await writeAcceptedFresh(tx, services, m, s, { attempt: { insert: attempt }, paymentHash: input.paymentHash, gate: input.gate, reference, now });
  if (!done) throw new Error(`settlement attempt ${attempt.id} was not written`);
  return { kind: 'done', result: done.result };
}
