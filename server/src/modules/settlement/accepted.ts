import { unixSeconds } from '../../lib/time.js';
import type { Decision, ReceiptClaims, SettleAccepted, Total, TrustTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { SqlOn } from '../../db/sql.js';
import { newId } from '../../lib/ids.js';
import type { Services } from '../../http/context.js';
import { totalOf, type SessionRow } from '../checkout/index.js';
import { importReceiptKey, inputFingerprint, signReceipt, type GateContext, type MandateResult, type ReceiptSigningKey } from '../gate/index.js';
import type { SettleMerchant } from '../merchants/index.js';
import { addOrder, addReceipt, orderById, orderRow, presentOrderEvent, receiptRow, type OrderRow, type ReceiptRow } from '../orders/index.js';
import type { RecordEventInput } from '../events/index.js';
import { applyOutcomes, NEUTRAL_SCORE, outcomeDeltas, type SessionOutcome } from '../reputation/index.js';
import { writeAcceptedAttempt, type AcceptedAttemptWrite } from './store.js';

/** The settle route's 200 (the contract's SettleAccepted). */
export type AcceptedResult = { status: 200; body: SettleAccepted };

/** A hosted session's new order (the row `newOrder` adds, or one statement inserts). */
export function orderFields(now: Date, m: SettleMerchant, s: SessionRow, decision: Decision, tier: TrustTier, mandate: MandateResult): OrderRow {
  return orderRow({
    sessionId: s.id,
    merchant: m,
    agentId: s.agentId,
    decision,
    total: totalOf(s) as Total,
    items: s.lines.map((l) => ({ sku: l.sku, qty: l.qty })),
    railName: s.rail,
    mandateType: mandate.type,
    mandateRef: mandate.ref,
    trustTier: tier,
    buyer: s.buyer ?? null,
    source: 'hosted',
    now,
  });
}

export function newOrder(tx: Em, now: Date, m: SettleMerchant, s: SessionRow, decision: Decision, tier: TrustTier, mandate: MandateResult) {
  return addOrder(tx, orderFields(now, m, s, decision, tier, mandate));
}

/**
 * Each merchant's receipt key, opened from its sealed seed and imported once per process
 * (services.caches.receiptKeys: the seed is decrypted once, not per settle; the imported key is
 * not extractable). Keyed by the sealed seed itself, so a merchant whose seed changed gets its new key.
 */
const RECEIPT_KEYS_MAX = 1024;
export function receiptKeyOf(services: Pick<Services, 'box' | 'caches'>, m: Pick<SettleMerchant, 'id' | 'receiptSeedSealed' | 'receiptPublicX' | 'receiptKid'>): Promise<ReceiptSigningKey> {
  const receiptKeys = services.caches.receiptKeys;
  const cacheKey = `${m.id}\0${m.receiptKid}\0${m.receiptSeedSealed}`;
  let key = receiptKeys.get(cacheKey);
  if (!key) {
    key = importReceiptKey({ d: services.box.open(m.receiptSeedSealed, m.id), x: m.receiptPublicX, kid: m.receiptKid });
    key.catch(() => receiptKeys.delete(cacheKey));
    if (receiptKeys.size >= RECEIPT_KEYS_MAX) receiptKeys.delete(receiptKeys.keys().next().value!);
    receiptKeys.set(cacheKey, key);
  }
  return key;
}

/** Stores a terminal result on the session so the same payment replays it byte for byte. */
export function storeSettleResult<R extends { status: number; body: unknown }>(s: SessionRow, paymentHash: string, result: R): R {
  s.settlePaymentHash = paymentHash;
  s.settleStatus = result.status;
  s.settleResponse = JSON.stringify(result.body);
  return result;
}

/** What an accepted settle writes around its order, computed before anything is written. */
export type AcceptedWrites = {
  receipt: ReceiptRow;
  /** The session's columns that change. */
  session: Pick<SessionRow, 'state' | 'settledAt' | 'orderId' | 'receiptId' | 'receiptJws' | 'settlementRef' | 'verdict' | 'paymentError' | 'gate' | 'settlePaymentHash' | 'settleStatus' | 'settleResponse'>;
  events: RecordEventInput[];
  outcomes: SessionOutcome[];
  result: AcceptedResult;
};

/**
 * The accept: `order` (new or the held one) gets its settlement, and the receipt is signed over
 * it. Everything else is returned for the caller to write: the unit of work (`writeAccepted`)
 * or one statement (settlement/store.ts `writeAcceptedAttempt`).
 */
export async function acceptedWrites(
  services: Pick<Services, 'box' | 'caches'>,
  m: SettleMerchant,
  s: SessionRow,
  order: OrderRow,
  input: { paymentHash: string; gate: GateContext; reference: string; attemptId: string; now: Date },
): Promise<AcceptedWrites> {
  const { gate, reference, now } = input;
  const receiptId = newId('rcpt');
  order.decision = 'accept';
  order.settlementRef = reference;
  order.receiptId = receiptId;
  order.settlementAttemptId = input.attemptId;
  order.settlementStatus = 'settled';

  const claims: ReceiptClaims = {
    iss: 'svc-checkout',
    sub: receiptId,
    iat: unixSeconds(now),
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
  const jws = await signReceipt(await receiptKeyOf(services, m), claims);
  const result: AcceptedResult = {
    status: 200,
    body: { status: 'accepted', order_id: order.id, receipt: jws, fulfillment: { rail: s.rail, reference } },
  };
  const event = { projectId: m.projectId, merchantId: m.id, livemode: m.livemode, object: presentOrderEvent(order), now };
  return {
    // the claims are a JSON object (ReceiptClaims has no index signature)
    receipt: receiptRow({ id: receiptId, orderId: order.id, sessionId: s.id, merchantId: m.id, jws, claims, now }),
    session: {
      state: 'accepted',
      settledAt: now,
      orderId: order.id,
      receiptId,
      receiptJws: jws,
      settlementRef: reference,
      verdict: gate.verdict,
      paymentError: null,
      gate: null,
      // the terminal result, stored so the same payment replays it byte for byte (storeSettleResult),
      // with the receipt left out: its JWS is stored once, in receipts (outcome.ts storedSettleBody puts it back)
      settlePaymentHash: input.paymentHash,
      settleStatus: result.status,
      settleResponse: JSON.stringify({ ...result.body, receipt: null }),
    },
    events: [
      { ...event, type: 'order.accepted' },
      { ...event, type: 'order.settled' },
    ],
    // The merchant's reputation row is one hot row per merchant: written last, so its lock is held only until the commit.
    outcomes: [
      { type: 'agent', subject: s.agentId, outcome: 'accepted' },
      { type: 'merchant', subject: m.id, outcome: 'settled_merchant' },
    ],
    result,
  };
}

/**
 * An accept whose session holds no order yet, as one statement (store.ts `writeAcceptedAttempt`):
 * `attempt` is the pending one to settle (live phase 3, no transaction around it) or a new one
 * inserted already settled (an in-process facilitator, in phase 1's transaction). Null when the
 * pending attempt was resolved by someone else first (nothing was written). On success the
 * session's new columns are also on `s`.
 */
export async function writeAcceptedFresh(
  em: SqlOn,
  services: Pick<Services, 'box' | 'caches' | 'events'>,
  m: SettleMerchant,
  s: SessionRow,
  input: FreshAcceptInput,
): Promise<{ result: AcceptedResult } | null> {
  const { write, writes: w } = await freshAcceptWrite(services, m, s, input);
  const done = await writeAcceptedAttempt(em, write);
  if (!done.accepted) return null;
  services.events.fanned(done.fanned);
  Object.assign(s, w.session);
  return { result: w.result };
}

export type FreshAcceptInput = { attempt: AcceptedAttemptWrite['attempt']; paymentHash: string; gate: GateContext; reference: string; now: Date };

/**
 * What `writeAcceptedFresh` writes, computed (the order, the signed receipt, the events, the
 * reputation deltas) and not yet written: also what the bench's ceiling handler sends.
 */
export async function freshAcceptWrite(
  services: Pick<Services, 'box' | 'caches' | 'events'>,
  m: SettleMerchant,
  s: SessionRow,
  input: FreshAcceptInput,
): Promise<{ write: AcceptedAttemptWrite; writes: AcceptedWrites }> {
  const { attempt, gate, reference, now } = input;
  const attemptId = 'pendingId' in attempt ? attempt.pendingId : attempt.insert.id;
  const order = orderFields(now, m, s, 'accept', gate.verdict.tier, gate.mandate);
  const w = await acceptedWrites(services, m, s, order, { ...input, attemptId });
  return {
    writes: w,
    write: {
      attempt,
      reference,
      order,
      receipt: w.receipt,
      sessionId: s.id,
      session: { ...w.session, policyVersion: s.policyVersion, policyHash: s.policyHash, payment: s.payment },
      events: services.events.prepare(w.events).rows,
      fanOutCtes: services.events.fanOutCtes,
      deltas: outcomeDeltas(s.id, m.livemode, w.outcomes),
      neutralScore: NEUTRAL_SCORE,
      now,
    },
  };
}

/**
 * Phase 3, in the caller's transaction, once the funds moved: the order (or the held one),
 * the receipt, reputation deltas, the session `accepted` and both events. The attempt must
 * be `settled` in this unit of work (flushed or not): the order's foreign key demands it, and
 * the order's relation to it makes the flush insert it first.
 */
export async function writeAccepted(
  tx: Em,
  services: Pick<Services, 'box' | 'caches' | 'now' | 'events'>,
  m: SettleMerchant,
  s: SessionRow,
  input: { paymentHash: string; gate: GateContext; reference: string; attemptId: string },
): Promise<AcceptedResult> {
  const now = services.now();
  let order = s.orderId ? await orderById(tx, s.orderId) : null;
  if (!order) order = newOrder(tx, now, m, s, 'accept', input.gate.verdict.tier, input.gate.mandate);
  const w = await acceptedWrites(services, m, s, order, { ...input, now });
  addReceipt(tx, w.receipt);
  Object.assign(s, w.session);
  // One flush: the attempt (settled), the order, the receipt, and the session's one update.
  await tx.flush();
  await services.events.recordMany(tx, w.events);
  await applyOutcomes(tx, s.id, m.livemode, w.outcomes, now);
  return w.result;
}
