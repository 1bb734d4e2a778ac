import type { Em } from '../../db/orm.js';

/**
 * Data access for the checkout tables that are reached with SQL: `checkout_sessions` is an
 * entity (./entity.ts), and the statements below are the ones an entity would make slower
 * or racy on the settle path (atomic reservations, an advisory lock, a counting window, an
 * atomic counter). Nothing outside this file writes SQL for these tables.
 */

/** Marks a session expired unless another request moved it on (one guarded update, no row load). */
export async function expireSession(em: Em, sessionId: string): Promise<void> {
  await em.execute(`update checkout_sessions set state = 'expired' where id = ? and state = 'awaiting_payment'`, [sessionId]);
}

/**
 * One gate at a time per (merchant, agent), until the transaction ends: velocity and daily
 * caps count the agent's other sessions, which row locks on this session do not cover.
 */
export async function lockGate(tx: Em, merchantId: string, agentId: string): Promise<void> {
  await tx.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`gate:${merchantId}:${agentId}`]);
}

/**
 * Accepted and in-flight (held, settling) sessions of this agent at this merchant in the
 * rolling windows ending at `now` (the injected clock, which also wrote `created_at`).
 * One aggregate statement rather than loading rows.
 */
export async function countVelocity(tx: Em, s: { id: string; merchantId: string; agentId: string }, now: Date) {
  const rows = await tx.execute<Array<{ last_hour: string | number; last_day: string | number; day_spend: string | null }>>(
    `select
       count(*) filter (where created_at > ?::timestamptz - interval '1 hour') as last_hour,
       count(*) as last_day,
       coalesce(sum(total::numeric), 0)::text as day_spend
     from checkout_sessions
     where merchant_id = ? and agent_id = ? and id <> ? and state in ('accepted', 'held', 'approved', 'settling')
       and created_at > ?::timestamptz - interval '1 day'`,
    [now, s.merchantId, s.agentId, s.id, now],
  );
  const r = rows[0]!;
  return { lastHour: Number(r.last_hour), lastDay: Number(r.last_day), daySpend: r.day_spend ?? '0' };
}

/** Reserves a mandate (issuer, subject) for the session by primary key; false when another session holds it. */
export async function reserveMandateSubject(tx: Em, sessionId: string, issuer: string, subject: string, now: Date): Promise<boolean> {
  const won = await tx.execute('insert into mandate_subjects (issuer, subject, session_id, created_at) values (?, ?, ?, ?) on conflict do nothing returning subject', [
    issuer,
    subject,
    sessionId,
    now,
  ]);
  return won.length > 0;
}

export type NonceKey = { chain: string; payer: string; nonce: string };

/**
 * Reserves an authorization's (chain, payer, nonce) for the session by primary key. Returns
 * the session holding it: this one when the insert won, another on a replay.
 */
export async function reservePaymentNonce(tx: Em, sessionId: string, k: NonceKey, now: Date): Promise<string | undefined> {
  const won = await tx.execute('insert into payment_nonces (chain, payer, nonce, session_id, created_at) values (?, ?, ?, ?, ?) on conflict do nothing returning nonce', [
    k.chain,
    k.payer,
    k.nonce,
    sessionId,
    now,
  ]);
  if (won.length > 0) return sessionId;
  const holder = await tx.execute<Array<{ session_id: string }>>('select session_id from payment_nonces where chain = ? and payer = ? and nonce = ?', [
    k.chain,
    k.payer,
    k.nonce,
  ]);
  return holder[0]?.session_id;
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
export async function hitRateLimitBucket(em: Em, bucket: string, windowStart: Date): Promise<number> {
  const rows = await em.execute<Array<{ hits: number }>>(
    `insert into rate_limit_buckets (bucket, window_start, hits) values (?, ?, 1)
     on conflict (bucket, window_start) do update set hits = rate_limit_buckets.hits + 1
     returning hits`,
    [bucket, windowStart],
  );
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
