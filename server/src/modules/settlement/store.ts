import type { Em } from '../../db/orm.js';
import { runSql, sqlParams, type SqlParams } from '../../db/sql.js';
import { eventCtes, type NewEventRow } from '../events/index.js';
import type { OrderRow, ReceiptRow } from '../orders/entity.js';
import { reputationCtes, type ReputationDelta } from '../reputation/store.js';
import type { SessionRow } from '../checkout/entity.js';
import type { AttemptRow } from './entity.js';

/**
 * `settlement_attempts` and `settlement_transactions` are entities (./entity.ts); the claim
 * below is SQL because it is one statement with FOR UPDATE SKIP LOCKED, so any number of
 * reconcilers share the table without taking the same attempt.
 */

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
export async function lockAttemptRow(tx: Em, attemptId: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await runSql(tx, 'select * from settlement_attempts where id = $1 for update', [attemptId]);
  return row;
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
  const { $, json } = b;
  const [row] = await runSql<{ id: string }>(
    tx,
    `with a as (${insertAttemptSql(b, a)})
     update checkout_sessions set state = ${$(s.state)}::text, settle_payment_hash = ${$(s.settlePaymentHash)}::text,
       policy_version = ${$(s.policyVersion)}::int, policy_hash = ${$(s.policyHash)}::text, payment = ${json(s.payment)},
       payment_error = ${json(s.paymentError)}, verdict = ${json(s.verdict)}, gate = ${json(s.gate)}
     where id = ${$(s.id)}::text returning id`,
    b.params,
  );
  if (!row) throw new Error(`checkout session ${s.id} not found`);
}

/**
 * A pending attempt's session row, with the attempt's payment hash (prepared, no lock): what
 * `writeAcceptedAttempt` is computed from. Undefined once the attempt is resolved.
 */
export async function pendingAttemptSession(em: Em, attemptId: string): Promise<{ session: Record<string, unknown>; paymentHash: string } | undefined> {
  const [row] = await runSql<Record<string, unknown> & { attempt_payment_hash: string }>(
    em,
    `select s.*, a.payment_hash as attempt_payment_hash
     from settlement_attempts a join checkout_sessions s on s.id = a.session_id where a.id = $1 and a.status = 'pending'`,
    [attemptId],
  );
  if (!row) return undefined;
  const { attempt_payment_hash: paymentHash, ...session } = row;
  return { session, paymentHash };
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
export async function writeAcceptedAttempt(
  em: Em,
  w: {
    attempt: { pendingId: string } | { insert: AttemptRow };
    /** The transfer's reference (the transaction hash, or the mock rail's). */
    reference: string;
    order: OrderRow;
    receipt: ReceiptRow;
    sessionId: string;
    /** The session's columns as they end: the accept's, and the gate's (the same as stored, for a live phase 3). */
    session: Pick<
      SessionRow,
      'settledAt' | 'orderId' | 'receiptId' | 'receiptJws' | 'settlementRef' | 'verdict' | 'settlePaymentHash' | 'settleStatus' | 'settleResponse' | 'policyVersion' | 'policyHash' | 'payment'
    >;
    events: NewEventRow[];
    fanOutCtes: string | null;
    deltas: ReputationDelta[];
    neutralScore: number;
    now: Date;
  },
): Promise<{ accepted: boolean; fanned: Array<{ event_id: string; endpoint_id: string }> }> {
  const b = sqlParams();
  const { $, json } = b;
  const { order: o, receipt: r, session: s, attempt } = w;
  const written = 'exists (select 1 from o)';
  const settleAttempt =
    'pendingId' in attempt
      ? `update settlement_attempts set status = 'settled', reference = ${$(w.reference)}::text, resolved_at = ${$(w.now)}::timestamptz
       where id = ${$(attempt.pendingId)}::text and status = 'pending' returning session_id`
      : insertAttemptSql(b, attempt.insert);
  const text = `with a as (${settleAttempt}),
     s as (
       update checkout_sessions set state = 'accepted', settled_at = ${$(s.settledAt ?? null)}::timestamptz, order_id = ${$(s.orderId)}::text,
         receipt_id = ${$(s.receiptId)}::text, receipt_jws = ${$(s.receiptJws)}::text, settlement_ref = ${$(s.settlementRef)}::text,
         verdict = ${json(s.verdict)}, payment_error = null, gate = null, settle_payment_hash = ${$(s.settlePaymentHash)}::text,
         settle_status = ${$(s.settleStatus)}::int, settle_response = ${$(s.settleResponse)}::text,
         policy_version = ${$(s.policyVersion)}::int, policy_hash = ${$(s.policyHash)}::text, payment = ${json(s.payment)}
       where id = (select session_id from a) and id = ${$(w.sessionId)}::text returning id),
     o as (
       insert into orders (id, session_id, project_id, merchant_id, livemode, agent_id, decision, total, items, rail_name, settlement_ref,
         receipt_id, mandate_type, mandate_ref, trust_tier, buyer, source, settlement_attempt_id, settlement_status, created_at)
       select ${$(o.id)}::text, s.id, ${$(o.projectId)}::text, ${$(o.merchantId)}::text, ${$(o.livemode)}::boolean, ${$(o.agentId)}::text,
         ${$(o.decision)}::text, ${json(o.total)}, ${json(o.items)}, ${$(o.railName)}::text, ${$(o.settlementRef)}::text, ${$(o.receiptId)}::text,
         ${$(o.mandateType)}::text, ${$(o.mandateRef)}::text, ${$(o.trustTier)}::text, ${json(o.buyer)}, ${$(o.source)}::text,
         ${$(o.settlementAttemptId)}::text, ${$(o.settlementStatus)}::text, ${$(o.createdAt)}::timestamptz
       from s returning id),
     r as (
       insert into receipts (id, order_id, session_id, merchant_id, jws, claims, created_at)
       select ${$(r.id)}::text, o.id, ${$(r.sessionId)}::text, ${$(r.merchantId)}::text, ${$(r.jws)}::text, ${json(r.claims)}, ${$(r.createdAt)}::timestamptz
       from o),
     ${eventCtes(b, w.events, w.fanOutCtes, written)},
     ${reputationCtes(b, w.deltas, w.neutralScore, w.now, written)}
     select 'accepted' as kind, null::text as event_id, null::text as endpoint_id from o
     ${w.fanOutCtes ? `union all select 'fanned', event_id, endpoint_id from fanned` : ''}`;
  const rows = await runSql<{ kind: string; event_id: string | null; endpoint_id: string | null }>(em, text, b.params);
  return {
    accepted: rows.some((x) => x.kind === 'accepted'),
    fanned: rows.filter((x) => x.kind === 'fanned').map((x) => ({ event_id: x.event_id!, endpoint_id: x.endpoint_id! })),
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
