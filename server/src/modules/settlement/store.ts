import type { Em } from '../../db/orm.js';
import { runSql } from '../../db/sql.js';

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
