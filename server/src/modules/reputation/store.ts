import type { Em } from '../../db/orm.js';
import { runSql, type SqlValue } from '../../db/sql.js';

/**
 * Data access for `reputation` and `reputation_events` (SQL only: a delta is applied at most
 * once with an insert-or-nothing on the event's primary key, and the score moves with one
 * atomic, clamped upsert; both run on the settle path).
 */

export async function findReputationScore(em: Em, subjectType: string, subjectId: string): Promise<number | undefined> {
  const rows = await em.execute<Array<{ score: number }>>('select score from reputation where subject_type = ? and subject_id = ?', [subjectType, subjectId]);
  return rows[0] ? Number(rows[0].score) : undefined;
}

export type ReputationDelta = { sessionId: string; subjectType: string; subjectId: string; delta: number; reason: string };

/**
 * Outcomes of one session in one statement: each event is inserted at most once (insert-or-
 * nothing on its primary key) and only the ones inserted move their subject's score (an
 * atomic upsert, clamped to 0..1000, from `neutral` for a new subject), in the order given (so
 * the caller decides which row is locked last).
 * Returns the new scores of the subjects that moved.
 */
export async function applyReputationDeltas(tx: Em, deltas: ReputationDelta[], neutral: number, now: Date): Promise<Array<{ subject_type: string; subject_id: string; score: number }>> {
  const params: SqlValue[] = [neutral, now];
  const values = deltas
    .map((d, i) => {
      const at = params.length;
      params.push(d.sessionId, d.subjectType, d.subjectId, d.delta, d.reason);
      return `(${i}, $${at + 1}::text, $${at + 2}::text, $${at + 3}::text, $${at + 4}::int, $${at + 5}::text)`;
    })
    .join(', ');
  return runSql(
    tx,
    `with d (ord, session_id, subject_type, subject_id, delta, reason) as (values ${values}),
     inserted as (
       insert into reputation_events (session_id, subject_type, subject_id, delta, reason, created_at)
       select session_id, subject_type, subject_id, delta, reason, $2::timestamptz from d order by ord
       on conflict do nothing returning session_id, subject_type, subject_id, reason)
     insert into reputation (subject_type, subject_id, score, outcomes, updated_at)
     select d.subject_type, d.subject_id, least(1000, greatest(0, $1::int + d.delta)), 1, $2::timestamptz
     from d join inserted i using (session_id, subject_type, subject_id, reason) order by d.ord
     on conflict (subject_type, subject_id) do update
       set score = least(1000, greatest(0, reputation.score + excluded.score - $1::int)), outcomes = reputation.outcomes + 1, updated_at = excluded.updated_at
     returning subject_type, subject_id, score`,
    params,
  );
}
