import { LockMode } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { runSql, runStatement, sqlParams, type SqlOn, type SqlParams, type Statement } from '../../db/sql.js';
import type { NewEventRow } from '../events/index.js';
import { eventCtes } from '../events/index.js';
import { insertOrderSql, insertReceiptSql, type OrderRow, type ReceiptRow } from '../orders/index.js';
import { reputationCtes, type ReputationDelta } from '../reputation/index.js';
import { acceptSessionSql, mapSessionRow, settlingSessionSql, type AcceptedSession, type SessionRow } from '../checkout/index.js';
import { RefundEntity, RefundTransactionEntity, SettlementAttemptEntity, SettlementTransactionEntity, type AttemptRow, type RefundRow } from './entity.js';

/**
 * Data access for `settlement_attempts` and `settlement_transactions` (entities, ./entity.ts):
 * every ORM call and statement on them. The claim is SQL because it is one statement with FOR
 * UPDATE SKIP LOCKED, so any number of reconcilers share the table without taking the same
 * attempt. `writeAcceptedAttempt` is the accepted-settle statement (docs/contributing.md, "Data access").
 */

/** A new attempt in the caller's unit of work (an approved hold's, inserted already settled). */
export function addAttempt(tx: Em, a: AttemptRow): AttemptRow {
  return tx.create(SettlementAttemptEntity, a);
}

export async function attemptById(em: Em, id: string): Promise<AttemptRow> {
  return em.findOneOrFail(SettlementAttemptEntity, { id });
}

/** A pending attempt is looked at again after `leaseUntil` (unless someone resolved it meanwhile). */
export async function extendPendingLease(em: Em, attemptId: string, leaseUntil: Date): Promise<void> {
  await em.nativeUpdate(SettlementAttemptEntity, { id: attemptId, status: 'pending' }, { leaseUntil });
}

/** The transactions stored for an attempt, oldest first. */
export async function attemptTransactions(em: Em, attemptId: string) {
  return em.find(SettlementTransactionEntity, { attemptId }, { orderBy: { createdAt: 'asc' } });
}

/**
 * Claims up to `limit` pending attempts whose lease ran out, extending their lease by
 * `leaseSeconds`. The comparison uses the database's now() on purpose: workers in several
 * processes compare one clock (leases written by the app clock are in the past or future of it alike).
 */
export async function claimDueAttempts(tx: Em, leaseSeconds: number, limit: number): Promise<string[]> {
  const rows = await tx.execute<Array<{ id: string }>>(
    `update settlement_attempts set lease_until = now() + make_interval(secs => ?)
     where id in (select id from settlement_attempts where status = 'pending' and lease_until < now()
                  order by lease_until limit ? for update skip locked)
     returning id`,
    [leaseSeconds, limit],
  );
  return rows.map((r) => r.id);
}

/** Phase 3's first statement: the attempt's row, locked until the transaction ends (prepared). */
export async function lockAttemptRow(tx: Em, attemptId: string): Promise<AttemptRow | undefined> {
  const [row] = await runSql(tx, 'select * from settlement_attempts where id = $1 for update', [attemptId]);
  return row ? tx.map(SettlementAttemptEntity, row) : undefined;
}

/** `insert into settlement_attempts … returning session_id` of one attempt, with its values bound. */
function insertAttemptSql({ $, json }: SqlParams, a: AttemptRow): string {
  return `insert into settlement_attempts (id, session_id, merchant_id, livemode, return_state, rail, facilitator, chain, payer, nonce,
         amount_base_units, proof, payment_hash, status, reference, failure_code, failure_human, lease_until, created_at, resolved_at)
       values (${$(a.id)}::text, ${$(a.sessionId)}::text, ${$(a.merchantId)}::text, ${$(a.livemode)}::boolean, ${$(a.returnState)}::text,
         ${$(a.rail)}::text, ${$(a.facilitator)}::text, ${$(a.chain)}::text, ${$(a.payer)}::text, ${$(a.nonce)}::text, ${$(a.amountBaseUnits)}::text,
         ${json(a.proof)}, ${$(a.paymentHash)}::text, ${$(a.status)}::text, ${$(a.reference)}::text, ${$(a.failureCode)}::text,
         ${$(a.failureHuman)}::text, ${$(a.leaseUntil)}::timestamptz, ${$(a.createdAt)}::timestamptz, ${$(a.resolvedAt)}::timestamptz)
       returning session_id`;
}

/**
 * Phase 1's writes for a facilitator outside the process, in one statement: the attempt
 * (`pending`) and the session `settling` with the gate's columns (policy, payment, verdict,
 * gate context) as the caller's row holds them.
 */
export async function insertAttemptSettling(tx: Em, a: AttemptRow, s: SessionRow): Promise<void> {
  const b = sqlParams();
  const [row] = await runSql<{ id: string }>(
    tx,
    `with a as (${insertAttemptSql(b, a)})
     ${settlingSessionSql(b, s)}`,
    b.params,
  );
  if (!row) throw new Error(`checkout session ${s.id} not found`);
}

/**
 * A pending attempt's session row, with the attempt's payment hash (prepared, no lock): what
 * `writeAcceptedAttempt` is computed from. Undefined once the attempt is resolved.
 */
export async function pendingAttemptSession(em: Em, attemptId: string): Promise<{ session: SessionRow; paymentHash: string } | undefined> {
  const [row] = await runSql<Record<string, unknown> & { attempt_payment_hash: string }>(
    em,
    `select s.*, a.payment_hash as attempt_payment_hash
     from settlement_attempts a join checkout_sessions s on s.id = a.session_id where a.id = $1 and a.status = 'pending'`,
    [attemptId],
  );
  if (!row) return undefined;
  const { attempt_payment_hash: paymentHash, ...session } = row;
  return { session: mapSessionRow(em, session), paymentHash };
}

/**
 * An accepted settle whose session holds no order yet, as one statement (atomic on its own):
 * the attempt `settled`, and only then its session `accepted`, the order, the receipt, the
 * events with their webhook fan-out and the reputation deltas. `attempt` is either a pending
 * attempt to settle (live phase 3: whoever resolved it first wins, and when it is not pending
 * any more nothing is written and `accepted` is false) or a new attempt inserted already
 * `settled` (an in-process facilitator, inside phase 1's transaction). The order's link to its
 * settled attempt is checked at commit (orders_settlement_attempt_fk).
 */
export async function writeAcceptedAttempt(em: SqlOn, w: AcceptedAttemptWrite): Promise<AcceptedAttemptOutcome> {
  return acceptedAttemptOutcome(await runStatement(em, acceptedAttemptStatement(w)));
}

/** What `writeAcceptedAttempt` writes. */
export type AcceptedAttemptWrite = {
  attempt: { pendingId: string } | { insert: AttemptRow };
  /** The transfer's reference (the transaction hash, or the mock rail's). */
  reference: string;
  order: OrderRow;
  receipt: ReceiptRow;
  sessionId: string;
  /** The session's columns as they end: the accept's, and the gate's (the same as stored, for a live phase 3). */
  session: AcceptedSession;
  events: NewEventRow[];
  fanOutCtes: string | null;
  deltas: ReputationDelta[];
  neutralScore: number;
  now: Date;
};
export type AcceptedAttemptOutcome = { accepted: boolean; fanned: Array<{ event_id: string; endpoint_id: string }> };

/** `writeAcceptedAttempt`'s statement: built here, and by the bench's ceiling handler as it is. */
export function acceptedAttemptStatement(w: AcceptedAttemptWrite): Statement {
  const b = sqlParams();
  const { $ } = b;
  const { attempt } = w;
  const written = 'exists (select 1 from o)';
  const settleAttempt =
    'pendingId' in attempt
      ? `update settlement_attempts set status = 'settled', reference = ${$(w.reference)}::text, resolved_at = ${$(w.now)}::timestamptz
       where id = ${$(attempt.pendingId)}::text and status = 'pending' returning session_id`
      : insertAttemptSql(b, attempt.insert);
  // Each table's part comes from its owner (checkout, orders, events, reputation); the CTEs chain
  // so nothing is written unless the attempt was settled by this statement.
  const text = `with a as (${settleAttempt}),
     s as (
       ${acceptSessionSql(b, w.sessionId, w.session, 'a')}),
     o as (
       ${insertOrderSql(b, w.order, 's')}),
     r as (
       ${insertReceiptSql(b, w.receipt, 'o')}),
     ${eventCtes(b, w.events, w.fanOutCtes, written)},
     ${reputationCtes(b, w.deltas, w.neutralScore, w.now, written)}
     select 'accepted' as kind, null::text as event_id, null::text as endpoint_id from o
     ${w.fanOutCtes ? `union all select 'fanned', event_id, endpoint_id from fanned` : ''}`;
  return { text, params: b.params };
}

/** The rows of `acceptedAttemptStatement`: whether it wrote the accept, and the deliveries it fanned out. */
export function acceptedAttemptOutcome(rows: Array<Record<string, unknown>>): AcceptedAttemptOutcome {
  const r = rows as Array<{ kind: string; event_id: string | null; endpoint_id: string | null }>;
  return {
    accepted: r.some((x) => x.kind === 'accepted'),
    fanned: r.filter((x) => x.kind === 'fanned').map((x) => ({ event_id: x.event_id!, endpoint_id: x.endpoint_id! })),
  };
}

/**
 * A transaction the facilitator is about to send, stored first: one prepared statement, no
 * transaction around it (phase 2 holds none), so it is durable before the bytes leave.
 */
export async function insertSettlementTransaction(
  em: Em,
  t: { txHash: string; attemptId: string; rawTx: string | null; relayer: string | null; relayerNonce: number | null; createdAt: Date },
): Promise<void> {
  await runSql(
    em,
    'insert into settlement_transactions (tx_hash, attempt_id, raw_tx, relayer, relayer_nonce, created_at) values ($1, $2, $3, $4, $5, $6)',
    [t.txHash, t.attemptId, t.rawTx, t.relayer, t.relayerNonce, t.createdAt],
  );
}

/** Settlement attempts by status (`pending`, `settled`, `failed`), for `GET /metrics`. */
export async function countAttemptsByStatus(em: Em): Promise<Record<string, number>> {
  const rows = await em.execute<Array<{ status: string; n: string | number }>>(`select status, count(*) as n from settlement_attempts group by status`);
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

// ---- refunds (docs/settlement.md "Refunds") ----

/**
 * A settled capture, locked FOR NO KEY UPDATE until the transaction ends: the lock the
 * `refunds_within_capture` trigger takes too, so one capture's refund writers run one at a time
 * (compatible with the KEY SHARE lock of a refund row's foreign key).
 */
export async function lockSettledCapture(tx: Em, attemptId: string): Promise<AttemptRow | undefined> {
  const [row] = await tx.execute<Array<Record<string, unknown>>>(
    "select * from settlement_attempts where id = ? and status = 'settled' for no key update",
    [attemptId],
  );
  return row ? tx.map(SettlementAttemptEntity, row) : undefined;
}

/** Base units of the capture's refunds that hold part of it: awaiting a signature, pending or succeeded (an integer string). */
export async function reservedRefundBaseUnits(tx: Em, attemptId: string): Promise<string> {
  const [row] = await tx.execute<Array<{ n: string }>>(
    `select coalesce(sum(amount_base_units), 0)::text as n from refunds where settlement_attempt_id = ? and status in ('requires_authorization', 'pending', 'succeeded')`,
    [attemptId],
  );
  return row?.n ?? '0';
}

/** A new refund in the caller's unit of work. */
export function addRefund(tx: Em, r: RefundRow): RefundRow {
  return tx.create(RefundEntity, r);
}

export async function refundById(em: Em, id: string): Promise<RefundRow | null> {
  return em.findOne(RefundEntity, { id });
}

/** The refund's row, locked until the transaction ends (every transition takes it first). */
export async function lockRefundRow(tx: Em, id: string): Promise<RefundRow | null> {
  return tx.findOne(RefundEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
}

/** Newest first (ids sort by creation), in the project and mode, optionally one order's, below `beforeId`. */
export async function listRefundRows(
  em: Em,
  scope: { projectId: string; livemode: boolean; orderId?: string | undefined; beforeId?: string | undefined },
  limit: number,
): Promise<RefundRow[]> {
  const where: Record<string, unknown> = { projectId: scope.projectId, livemode: scope.livemode };
  if (scope.orderId !== undefined) where.orderId = scope.orderId;
  if (scope.beforeId !== undefined) where.id = { $lt: scope.beforeId };
  return em.find(RefundEntity, where, { orderBy: { id: 'desc' }, limit });
}

/**
 * Claims pending refunds whose lease ran out, like `claimDueAttempts` (the database's now(), so
 * workers in several processes compare one clock).
 */
export async function claimDueRefunds(tx: Em, leaseSeconds: number, limit: number): Promise<string[]> {
  const rows = await tx.execute<Array<{ id: string }>>(
    `update refunds set lease_until = now() + make_interval(secs => ?)
     where id in (select id from refunds where status = 'pending' and lease_until < now()
                  order by lease_until limit ? for update skip locked)
     returning id`,
    [leaseSeconds, limit],
  );
  return rows.map((r) => r.id);
}

/** Refunds still awaiting a signature whose authorization window closed (`valid_before` < `nowSec`). */
export async function lapsedRefundIds(em: Em, nowSec: number, limit: number): Promise<string[]> {
  const rows = await em.execute<Array<{ id: string }>>(
    `select id from refunds where status = 'requires_authorization' and valid_before < ? order by valid_before limit ?`,
    [nowSec, limit],
  );
  return rows.map((r) => r.id);
}

/** A pending refund is looked at again after `leaseUntil`. */
export async function extendRefundLease(em: Em, refundId: string, leaseUntil: Date): Promise<void> {
  await em.nativeUpdate(RefundEntity, { id: refundId, status: 'pending' }, { leaseUntil });
}

/** A transaction a live facilitator is about to send for a refund, stored first (no transaction around it). */
export async function insertRefundTransaction(
  em: Em,
  t: { txHash: string; refundId: string; rawTx: string | null; relayer: string | null; relayerNonce: number | null; createdAt: Date },
): Promise<void> {
  await em.execute('insert into refund_transactions (tx_hash, refund_id, raw_tx, relayer, relayer_nonce, created_at) values (?, ?, ?, ?, ?, ?)', [
    t.txHash,
    t.refundId,
    t.rawTx,
    t.relayer,
    t.relayerNonce,
    t.createdAt,
  ]);
}

/** The transactions stored for a refund, oldest first. */
export async function refundTransactions(em: Em, refundId: string) {
  return em.find(RefundTransactionEntity, { refundId }, { orderBy: { createdAt: 'asc' } });
}
