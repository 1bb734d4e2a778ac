import { LockMode } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { entityById, runSql, runStatement, sqlParams, type SqlOn, type SqlParams, type Statement } from '../../db/sql.js';
import { SETTLE_MERCHANT_COLUMNS, settleMerchantOf, type SettleMerchant } from '../merchants/index.js';
import { CheckoutSessionEntity, type SessionRow } from './entity.js';

/**
 * Data access for `checkout_sessions` (an entity, ./entity.ts), `payment_nonces`,
 * `mandate_subjects` and `rate_limit_buckets`: every ORM call and statement on them. SQL is
 * used where an entity would be slower or racy on the settle path (atomic reservations, an
 * advisory lock, a counting window, an atomic counter). Nothing outside this file queries
 * these tables, except the accepted-settle statement (settlement/store.ts), which takes its
 * session update from `acceptSessionSql` below.
 */

/** A session by id as the unit of work holds it, else by one prepared statement. */
export async function sessionById(em: Em, id: string): Promise<SessionRow | null> {
  return entityById(em, CheckoutSessionEntity, id, sessionRowById);
}

/** A session by id through the ORM (the merchant API's session read). */
export async function findSessionRow(em: Em, id: string): Promise<SessionRow | null> {
  return em.findOne(CheckoutSessionEntity, { id });
}

/** The session an agent opened with this idempotency key (at one merchant, when given). */
export async function sessionByIdempotencyKey(em: Em, key: { merchantId?: string; agentId: string; idempotencyKey: string }): Promise<SessionRow | null> {
  return em.findOne(CheckoutSessionEntity, key.merchantId === undefined ? { agentId: key.agentId, idempotencyKey: key.idempotencyKey } : { merchantId: key.merchantId, agentId: key.agentId, idempotencyKey: key.idempotencyKey });
}

/** The session's row locked for the rest of the transaction, read afresh (the hold review). */
export async function lockSession(tx: Em, id: string): Promise<SessionRow> {
  return tx.findOneOrFail(CheckoutSessionEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
}

/** The same, or null when it is gone (the settlement worker's sweep). */
export async function lockSessionIfAny(tx: Em, id: string): Promise<SessionRow | null> {
  return tx.findOne(CheckoutSessionEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
}

/** Up to `limit` sessions whose review or re-sign window passed (their ids only), for the worker to reject. */
export async function lapsedSessionIds(em: Em, now: Date, limit: number): Promise<Array<{ id: string }>> {
  return em.find(
    CheckoutSessionEntity,
    { $or: [{ state: 'held', holdExpiresAt: { $lt: now } }, { state: 'approved', expiresAt: { $lt: now } }] },
    { fields: ['id'], limit },
  );
}

/** A raw `checkout_sessions` row (from a statement that joined it) as the unit of work's entity. */
export function mapSessionRow(em: Em, row: Record<string, unknown>): SessionRow {
  return em.map(CheckoutSessionEntity, row);
}

/** The row each plain session (`plainSession`) was read from, for `adoptSession`. */
const rowsOfPlain = new WeakMap<SessionRow, Record<string, unknown>>();
const SESSION_TIMESTAMPS = new Set(['created_at', 'expires_at', 'settled_at', 'hold_expires_at']);
const camel = (k: string) => k.replace(/_([a-z])/g, (_m, c: string) => c.toUpperCase());

/**
 * A raw `checkout_sessions` row (jsonb parsed by the driver, timestamps as text or Dates) as a plain object of the entity's shape, outside the unit of work: the settle path's
 * sessions, which it writes by its own statements (docs/contributing.md, "Data access").
 */
export function plainSession(row: Record<string, unknown>): SessionRow {
  const s: Record<string, unknown> = {};
  for (const k in row) {
    const v = row[k];
    // the ORM's drivers hand timestamps over as text (it parses them itself): the same here
    s[camel(k)] = typeof v === 'string' && SESSION_TIMESTAMPS.has(k) ? new Date(v) : v;
  }
  const session = s as SessionRow;
  rowsOfPlain.set(session, row);
  return session;
}

/**
 * The session as the unit of work's entity, for the ends of a settle that write through it (a
 * rejection, a hold, an approved hold's order): a plain session becomes an entity from the row
 * it was read from, with the changes made to it since (so the flush writes exactly those); an
 * entity is returned as it is.
 */
export function adoptSession(tx: Em, s: SessionRow): SessionRow {
  const row = rowsOfPlain.get(s);
  if (!row) return s;
  const entity = tx.getUnitOfWork().getById<SessionRow>(CheckoutSessionEntity, s.id as never) ?? tx.map(CheckoutSessionEntity, row);
  Object.assign(entity, s);
  return entity;
}

/** Whether the unit of work holds this session (an entity it will flush), rather than a plain one. */
export function isSessionEntity(tx: Em, s: SessionRow): boolean {
  return tx.getUnitOfWork().getById(CheckoutSessionEntity, s.id as never) === s;
}

/** Marks a session expired unless another request moved it on (one guarded update, no row load). */
export async function expireSession(em: Em, sessionId: string): Promise<void> {
  await em.execute(`update checkout_sessions set state = 'expired' where id = ? and state = 'awaiting_payment'`, [sessionId]);
}

/** Reserves a mandate (issuer, subject) for the session by primary key; false when another session holds it. */
export async function reserveMandateSubject(tx: SqlOn, sessionId: string, issuer: string, subject: string, now: Date): Promise<boolean> {
  const won = await runStatement(tx, {
    text: 'insert into mandate_subjects (issuer, subject, session_id, created_at) values ($1, $2, $3, $4) on conflict do nothing returning subject',
    params: [issuer, subject, sessionId, now],
  });
  return won.length > 0;
}

export type NonceKey = { chain: string; payer: string; nonce: string };

/**
 * The authorization's replay reservation, written once for both statements that take it
 * (`reservePaymentNonce`, `readGateInputs`), over the caller's placeholders: `won` is a CTE that
 * inserts (chain, payer, nonce) for the session unless another holds it (nothing without a
 * chain), `holder` the session holding it after that insert.
 */
function nonceReservationSql(p: { sessionId: string; now: string; chain: string; payer: string; nonce: string }): { won: string; holder: string } {
  return {
    won: `won as (
       insert into payment_nonces (chain, payer, nonce, session_id, created_at)
       select ${p.chain}::text, ${p.payer}::text, ${p.nonce}::text, ${p.sessionId}::text, ${p.now}::timestamptz where ${p.chain}::text is not null
       on conflict do nothing returning session_id)`,
    holder: `coalesce((select session_id from won), (select session_id from payment_nonces where chain = ${p.chain} and payer = ${p.payer} and nonce = ${p.nonce}))`,
  };
}

/**
 * Reserves an authorization's (chain, payer, nonce) for the session by primary key. Returns
 * the session holding it: this one when the insert won, another on a replay (undefined when
 * the holder committed after this statement's snapshot: a replay too). One statement.
 */
export async function reservePaymentNonce(tx: Em, sessionId: string, k: NonceKey, now: Date): Promise<string | undefined> {
  const nonce = nonceReservationSql({ chain: '$1', payer: '$2', nonce: '$3', sessionId: '$4', now: '$5' });
  const rows = await runSql<{ holder: string | null }>(tx, `with ${nonce.won} select ${nonce.holder} as holder`, [k.chain, k.payer, k.nonce, sessionId, now]);
  return rows[0]?.holder ?? undefined;
}

/**
 * The settle's locks, in one round trip: the session row (FOR UPDATE, its latest version) and
 * the gate's advisory lock of (merchant, agent), which velocity and daily caps need (they count the agent's other sessions, which row locks on this session do not cover). Only settles take the gate
 * lock, so taking both in one statement cannot deadlock with the other writers of the row.
 * Returns the session as a plain object (`plainSession`), or undefined when it is gone.
 */
export async function lockSessionForGate(tx: Em, sessionId: string, merchantId: string, agentId: string): Promise<SessionRow | undefined> {
  const rows = await runSql(
    tx,
    `select s.*, r.jws as receipt_jws, pg_advisory_xact_lock(hashtextextended($2, 0)) as gate_locked
     from checkout_sessions s left join receipts r on r.id = s.receipt_id where s.id = $1 for update of s`,
    [sessionId, `gate:${merchantId}:${agentId}`],
  );
  const row = rows[0];
  if (!row) return undefined;
  delete row.gate_locked;
  return plainSession(await withReceiptJws(tx, row));
}

/** The session's columns a settle reads (all but the create's answer and idempotency key), and its receipt's JWS. */
const SETTLE_SESSION_COLUMNS = `s.id, s.merchant_id, s.livemode, s.agent_id, s.state, s.lines, s.currency, s.subtotal, s.tax, s.total,
  s.amount_base_units, s.rail, s.pay_to, s.chain, s.asset, s.buyer, s.buyer_intent, s.mandate, s.path_prefix, s.payment, s.verdict,
  s.settle_payment_hash, s.settle_status, s.settle_response, s.order_id, s.receipt_id, r.jws as receipt_jws, s.settlement_ref,
  s.policy_version, s.policy_hash, s.gate, s.payment_error, s.created_at, s.expires_at, s.settled_at, s.hold_expires_at`;

/** A settle's session and merchant, locked (lockSettleRow). `byRef`: the merchant is the one the URL's reference names. */
export type LockedSettle = { session: SessionRow; merchant: SettleMerchant; byRef: boolean };

/**
 * The settle's first statement inside its transaction: the session row (FOR UPDATE, its latest
 * version, only the columns a settle reads), its receipt's JWS, its merchant's settle columns,
 * and the gate's advisory lock of (merchant, agent), as `lockSessionForGate` takes it. `ref` is
 * the merchant reference of the URL: an `mrch_` id, or a slug (which names the published live
 * merchant with it when there is one, else the published test one: agent/discovery.ts
 * `merchantByRef`); `byRef` says whether this session's merchant is that one. It reads
 * `merchants` and `receipts` on purpose (docs/contributing.md, "Data access"). Undefined when
 * the session does not exist.
 */
export async function lockSettleRow(tx: SqlOn, sessionId: string, ref: SettleRef): Promise<LockedSettle | undefined> {
  const [row] = await runStatement(tx, settleRowStatement(sessionId, ref, true));
  return row ? settleRowOf(await withReceiptJws(tx, row)) : undefined;
}

/**
 * A locked row's receipt JWS, read again when its join found none though the session names a
 * receipt: a lock that waited for the settle which wrote both sees the session's new version,
 * but its join still reads the statement's snapshot, taken before that receipt existed (read
 * committed). Only a settle that raced the first one, and replays it, pays this statement.
 */
async function withReceiptJws(tx: SqlOn, row: Record<string, unknown>): Promise<Record<string, unknown>> {
  if (row.receipt_id && row.receipt_jws == null) {
    const [r] = await runStatement<{ jws: string }>(tx, { text: 'select jws from receipts where id = $1', params: [row.receipt_id as string] });
    row.receipt_jws = r?.jws ?? null;
  }
  return row;
}

/** The same read without a lock or a transaction: the settle that needs the outside before its gate (a live facilitator's check, an issuer's keys). */
export async function readSettleRow(em: Em, sessionId: string, ref: SettleRef): Promise<LockedSettle | undefined> {
  const [row] = await runStatement(em, settleRowStatement(sessionId, ref, false));
  return row ? settleRowOf(row) : undefined;
}

/** The merchant reference of a settle's URL: an `mrch_` id, or a lower-cased slug. */
export type SettleRef = { id: string } | { slug: string };

/** `lockSettleRow`'s statement (and `readSettleRow`'s, unlocked): built here, and by the bench's ceiling handler as it is. */
export function settleRowStatement(sessionId: string, ref: SettleRef, lock: boolean): Statement {
  return {
    text: `select ${SETTLE_SESSION_COLUMNS}, ${SETTLE_MERCHANT_COLUMNS},
       m.published_at is not null and (m.id = $2 or (m.slug = $3 and (m.livemode or not exists
         (select 1 from merchants x where x.slug = $3 and x.livemode and x.published_at is not null)))) as by_ref
       ${lock ? `, pg_advisory_xact_lock(hashtextextended('gate:' || s.merchant_id || ':' || s.agent_id::text, 0)) as gate_locked` : ''}
     from checkout_sessions s join merchants m on m.id = s.merchant_id left join receipts r on r.id = s.receipt_id
     where s.id = $1 ${lock ? 'for update of s' : ''}`,
    params: [sessionId, 'id' in ref ? ref.id : null, 'slug' in ref ? ref.slug : null],
  };
}

/** A row of `settleRowStatement`: the plain session, its merchant, and whether the reference names that merchant. */
export function settleRowOf(row: Record<string, unknown>): LockedSettle {
  const merchant = settleMerchantOf(row);
  const byRef = row.by_ref === true;
  const session: Record<string, unknown> = {};
  for (const k in row) if (!k.startsWith('m_') && k !== 'by_ref' && k !== 'gate_locked') session[k] = row[k];
  return { session: plainSession(session), merchant, byRef };
}

/** The session's row, locked until the transaction ends (phase 3, after its attempt's; prepared), as the unit of work's entity. */
export async function lockSessionRow(tx: Em, sessionId: string): Promise<SessionRow | undefined> {
  const [row] = await runSql(tx, `select s.*, r.jws as receipt_jws from checkout_sessions s left join receipts r on r.id = s.receipt_id where s.id = $1 for update of s`, [sessionId]);
  return row ? mapSessionRow(tx, await withReceiptJws(tx, row)) : undefined;
}

/** A session's row by primary key (prepared; the ORM would build the query anew per request). */
export async function sessionRowById(em: Em, sessionId: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await runSql(em, 'select s.*, r.jws as receipt_jws from checkout_sessions s left join receipts r on r.id = s.receipt_id where s.id = $1', [sessionId]);
  return row;
}

export type GateInputs = {
  /** The agent's shared score in the session's mode (null: unknown there), and the merchant's project's own adjustment to it from its ingest reports (null: none). */
  agentReputation: { score: number | null; adjustment: number | null };
  velocity: { lastHour: number; lastDay: number; daySpend: string };
  policy: { version: number; hash: string; body: Record<string, unknown> } | null;
  /** The session holding the authorization's nonce (this one when the reservation won); null without a nonce. */
  nonceHolder: string | null | undefined;
};

/**
 * Everything the gate reads, and the authorization's replay reservation, in one statement
 * taken after `lockSessionForGate` (so its snapshot sees every earlier gate of this agent):
 * the agent's reputation as the merchant's project sees it in the session's mode (the shared score
 * and the project's own ingest adjustment), the velocity window (accepted and in-flight sessions of the agent at the merchant in the rolling hour and day, on the injected clock that wrote `created_at`), the merchant's
 * active policy, and the insert-or-nothing into `payment_nonces` (see `reservePaymentNonce`).
 * It reads `reputation`, `reputation_adjustments` and `policy_versions` on purpose (docs/contributing.md, "Data access").
 */
export async function readGateInputs(tx: SqlOn, s: GateSubject, nonce: NonceKey | null, now: Date): Promise<GateInputs> {
  const [row] = await runStatement<GateInputsRow>(tx, gateInputsStatement(s, nonce, now));
  return gateInputsOf(row!, nonce);
}

/** Whose gate `readGateInputs` reads for: the session, its merchant's project and mode, the agent's reputation subject. */
export type GateSubject = { id: string; merchantId: string; agentId: string; agentSubject: string; livemode: boolean; projectId: string };
type GateInputsRow = {
  score: number | null;
  adjustment: number | null;
  last_hour: string | number;
  last_day: string | number;
  day_spend: string | null;
  policy_version: number | null;
  policy_hash: string | null;
  policy_body: unknown;
  nonce_holder: string | null;
};

/** `readGateInputs`' statement: built here, and by the bench's ceiling handler as it is. */
export function gateInputsStatement(s: GateSubject, nonce: NonceKey | null, now: Date): Statement {
  const reservation = nonceReservationSql({ sessionId: '$1', now: '$5', chain: '$6', payer: '$7', nonce: '$8' });
  return {
    text: `with ${reservation.won},
     velocity as (
       select count(*) filter (where created_at > $5::timestamptz - interval '1 hour') as last_hour,
              count(*) as last_day,
              coalesce(sum(total::numeric), 0)::text as day_spend
       from checkout_sessions
       where merchant_id = $2 and agent_id = $3::uuid and id <> $1 and state in ('accepted', 'held', 'approved', 'settling')
         and created_at > $5::timestamptz - interval '1 day')
     select (select score from reputation where livemode = $9 and subject_type = 'agent' and subject_id = $4) as score,
            (select adjustment from reputation_adjustments where project_id = $10 and livemode = $9 and subject_type = 'agent' and subject_id = $4) as adjustment,
            v.last_hour, v.last_day, v.day_spend,
            p.version as policy_version, p.hash as policy_hash, p.body::text as policy_body,
            ${reservation.holder} as nonce_holder
     from velocity v left join policy_versions p on p.merchant_id = $2 and p.active`,
    params: [s.id, s.merchantId, s.agentId, s.agentSubject, now, nonce?.chain ?? null, nonce?.payer ?? null, nonce?.nonce ?? null, s.livemode, s.projectId],
  };
}

/** A row of `gateInputsStatement` as the gate reads it. */
export function gateInputsOf(r: GateInputsRow | Record<string, unknown>, nonce: NonceKey | null): GateInputs {
  const row = r as GateInputsRow;
  const body = typeof row.policy_body === 'string' ? (JSON.parse(row.policy_body) as Record<string, unknown>) : null;
  return {
    agentReputation: {
      score: row.score === null || row.score === undefined ? null : Number(row.score),
      adjustment: row.adjustment === null || row.adjustment === undefined ? null : Number(row.adjustment),
    },
    velocity: { lastHour: Number(row.last_hour), lastDay: Number(row.last_day), daySpend: row.day_spend ?? '0' },
    policy: row.policy_version === null || row.policy_version === undefined ? null : { version: Number(row.policy_version), hash: row.policy_hash!, body: body ?? {} },
    nonceHolder: nonce ? row.nonce_holder : undefined,
  };
}

/** Frees the session's authorization nonces (all of them, or the one named). */
export async function releasePaymentNonces(tx: Em, sessionId: string, only?: NonceKey): Promise<void> {
  if (only) {
    await tx.execute('delete from payment_nonces where session_id = ? and chain = ? and payer = ? and nonce = ?', [sessionId, only.chain, only.payer, only.nonce]);
  } else {
    await tx.execute('delete from payment_nonces where session_id = ?', [sessionId]);
  }
}

export async function releaseMandateSubjects(tx: Em, sessionId: string): Promise<void> {
  await tx.execute('delete from mandate_subjects where session_id = ?', [sessionId]);
}

/**
 * Counts one hit in a fixed window with one atomic upsert, so every server process shares
 * the count; returns the window's hits so far.
 */
/** One hit in a fixed window ($1 the bucket, $2 the window's start), answering the window's count: alone or inside a larger statement. */
const HIT_RATE_LIMIT_BUCKET = `insert into rate_limit_buckets (bucket, window_start, hits) values ($1, $2, 1)
  on conflict (bucket, window_start) do update set hits = rate_limit_buckets.hits + 1
  returning hits`;

/** The catalog rows a checkout prices its lines from. */
export type CheckoutItem = { id: string; sku: string; name: string; priceAmount: string; currency: string; available: boolean };
export type CheckoutInputs = { hits: number; items: CheckoutItem[]; policy: { version: number; hash: string; body: Record<string, unknown> } | null };

/**
 * Everything a checkout reads, in one statement: the rate-limit window's count after this
 * request's hit (the upsert of `hitRateLimitBucket`), the cart's catalog rows, and the active
 * policy. Money columns are text, read as text. Like `readGateInputs`, it reads
 * `catalog_items` and `policy_versions` on purpose (docs/contributing.md, "Data access").
 */
export async function readCheckoutInputs(em: Em, merchantId: string, skus: string[], bucket: string, windowStart: Date): Promise<CheckoutInputs> {
  const [row] = await runSql<{ hits: number | string; items: CheckoutItem[] | string; policy: CheckoutInputs['policy'] | string | null }>(
    em,
    `with hit as (${HIT_RATE_LIMIT_BUCKET})
     select (select hits from hit) as hits,
       (select coalesce(json_agg(json_build_object('id', c.id, 'sku', c.sku, 'name', c.name, 'priceAmount', c.price_amount,
                'currency', c.currency, 'available', c.available)), '[]'::json)
          from catalog_items c where c.merchant_id = $3 and c.sku in (select jsonb_array_elements_text($4::text::jsonb))) as items,
       (select json_build_object('version', p.version, 'hash', p.hash, 'body', p.body)
          from policy_versions p where p.merchant_id = $3 and p.active) as policy`,
    [bucket, windowStart, merchantId, JSON.stringify(skus)],
  );
  const json = <T>(v: T | string): T => (typeof v === 'string' ? (JSON.parse(v) as T) : v);
  return { hits: Number(row!.hits), items: json(row!.items), policy: row!.policy === null ? null : json(row!.policy) };
}

/** The columns a new session is inserted with; the rest start null. */
export type NewSession = Pick<
  SessionRow,
  | 'id' | 'merchantId' | 'livemode' | 'agentId' | 'state' | 'lines' | 'currency' | 'subtotal' | 'tax' | 'total' | 'amountBaseUnits' | 'rail'
  | 'payTo' | 'chain' | 'asset' | 'buyer' | 'buyerIntent' | 'mandate' | 'pathPrefix' | 'idempotencyKey' | 'requestHash' | 'createResponse'
  | 'createdAt' | 'expiresAt'
>;

/** A new session in one statement (no transaction around it); a second create with one idempotency key meets checkout_sessions_agent_idem. */
export async function insertSession(em: Em, s: NewSession): Promise<void> {
  const { params, $, json } = sqlParams();
  await runSql(
    em,
    `insert into checkout_sessions (id, merchant_id, livemode, agent_id, state, lines, currency, subtotal, tax, total, amount_base_units, rail,
       pay_to, chain, asset, buyer, buyer_intent, mandate, path_prefix, idempotency_key, request_hash, create_response, created_at, expires_at)
     values (${$(s.id)}, ${$(s.merchantId)}, ${$(s.livemode)}, ${$(s.agentId)}::uuid, ${$(s.state)}, ${json(s.lines)}, ${$(s.currency)}, ${$(s.subtotal)},
       ${$(s.tax)}, ${$(s.total)}, ${$(s.amountBaseUnits)}, ${$(s.rail)}, ${$(s.payTo)}, ${$(s.chain)}, ${$(s.asset)}, ${json(s.buyer)}, ${$(s.buyerIntent)},
       ${json(s.mandate)}, ${$(s.pathPrefix)}, ${$(s.idempotencyKey)}, ${$(s.requestHash)}, ${$(s.createResponse)}, ${$(s.createdAt)}, ${$(s.expiresAt)})`,
    params,
  );
}

export async function hitRateLimitBucket(em: Em, bucket: string, windowStart: Date): Promise<number> {
  const rows = await runSql<{ hits: number | string }>(em, HIT_RATE_LIMIT_BUCKET, [bucket, windowStart]);
  return Number(rows[0]?.hits ?? 0);
}

export async function deleteRateLimitBucketsBefore(em: Em, before: Date): Promise<void> {
  await em.execute('delete from rate_limit_buckets where window_start < ?', [before]);
}

/**
 * Sessions held for merchant review now, in a project and mode (one merchant when given):
 * the summary's `holds_waiting`. A count over the partial index of held sessions.
 */
export async function countHeldSessions(em: Em, scope: { projectId: string; livemode: boolean; merchantId?: string | undefined }): Promise<number> {
  const params: unknown[] = [scope.projectId, scope.livemode];
  let merchantClause = '';
  if (scope.merchantId !== undefined) {
    merchantClause = 'and s.merchant_id = ?';
    params.push(scope.merchantId);
  }
  const rows = await em.execute<Array<{ n: string | number }>>(
    `select count(*) as n from checkout_sessions s join merchants m on m.id = s.merchant_id
     where s.state = 'held' and m.project_id = ? and m.livemode = ? ${merchantClause}`,
    params,
  );
  return Number(rows[0]?.n ?? 0);
}

/*
 * The session's part of settlement's multi-table statements (settlement/store.ts): built here,
 * with the caller's parameters, so the session's columns are named in this module only.
 */

/** Whether a hosted session has this id (one `?`: the id), for a guard that reads several modules' tables in one statement (ingest). */
export const HOSTED_SESSION_ID_SQL = 'select 1 from checkout_sessions where id = ?';

/** Phase 1's session update (`settling`, with the gate's columns), for the statement that also inserts the attempt. */
export function settlingSessionSql({ $, json }: SqlParams, s: SessionRow): string {
  return `update checkout_sessions set state = ${$(s.state)}::text, settle_payment_hash = ${$(s.settlePaymentHash)}::text,
       policy_version = ${$(s.policyVersion)}::int, policy_hash = ${$(s.policyHash)}::text, payment = ${json(s.payment)},
       payment_error = ${json(s.paymentError)}, verdict = ${json(s.verdict)}, gate = ${json(s.gate)}
     where id = ${$(s.id)}::text returning id`;
}

/** The session's columns an accepted settle writes. */
export type AcceptedSession = Pick<
  SessionRow,
  'settledAt' | 'orderId' | 'receiptId' | 'settlementRef' | 'verdict' | 'settlePaymentHash' | 'settleStatus' | 'settleResponse' | 'policyVersion' | 'policyHash' | 'payment'
>;

/** The accepted settle's session update: `accepted`, only when the attempt CTE `attemptCte` returned this session. */
export function acceptSessionSql({ $, json }: SqlParams, sessionId: string, s: AcceptedSession, attemptCte: string): string {
  return `update checkout_sessions set state = 'accepted', settled_at = ${$(s.settledAt ?? null)}::timestamptz, order_id = ${$(s.orderId)}::text,
         receipt_id = ${$(s.receiptId)}::text, settlement_ref = ${$(s.settlementRef)}::text,
         verdict = ${json(s.verdict)}, payment_error = null, gate = null, settle_payment_hash = ${$(s.settlePaymentHash)}::text,
         settle_status = ${$(s.settleStatus)}::int, settle_response = ${$(s.settleResponse)}::text,
         policy_version = ${$(s.policyVersion)}::int, policy_hash = ${$(s.policyHash)}::text, payment = ${json(s.payment)}
       where id = (select session_id from ${attemptCte}) and id = ${$(sessionId)}::text returning id`;
}

