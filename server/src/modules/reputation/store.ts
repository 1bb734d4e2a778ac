import type { Em } from '../../db/orm.js';
import { runSql, sqlParams, type SqlParams } from '../../db/sql.js';

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
 * The CTEs that apply reputation deltas, for a statement of the caller's: each (session,
 * subject, reason) counts once (`reputation_events` is unique on it), and only what was newly
 * recorded moves a score, clamped to 0..1000, from `neutral` for a new subject. They end in
 * `rep_scores(subject_type, subject_id, score)`. `guard`, an SQL condition, keeps every delta
 * out unless it holds. Values are bound through `b`.
 */
export function reputationCtes({ $ }: SqlParams, deltas: ReputationDelta[], neutral: number, now: Date, guard = 'true'): string {
  const $neutral = `${$(neutral)}::int`;
  const $now = `${$(now)}::timestamptz`;
  const values = deltas
    .map((d, i) => `(${i}, ${$(d.sessionId)}::text, ${$(d.subjectType)}::text, ${$(d.subjectId)}::text, ${$(d.delta)}::int, ${$(d.reason)}::text)`)
    .join(', ');
  return `rep_d (ord, session_id, subject_type, subject_id, delta, reason) as (select * from (values ${values}) as v where ${guard}),
     rep_events as (
       insert into reputation_events (session_id, subject_type, subject_id, delta, reason, created_at)
       select session_id, subject_type, subject_id, delta, reason, ${$now} from rep_d order by ord
       on conflict do nothing returning session_id, subject_type, subject_id, reason),
     rep_scores as (
       insert into reputation (subject_type, subject_id, score, outcomes, updated_at)
       select d.subject_type, d.subject_id, least(1000, greatest(0, ${$neutral} + d.delta)), 1, ${$now}
       from rep_d d join rep_events i using (session_id, subject_type, subject_id, reason) order by d.ord
       on conflict (subject_type, subject_id) do update
         set score = least(1000, greatest(0, reputation.score + excluded.score - ${$neutral})), outcomes = reputation.outcomes + 1, updated_at = excluded.updated_at
       returning subject_type, subject_id, score)`;
}

/**
 * Outcomes of one session in one statement (`reputationCtes`), in the order given (so the
 * caller decides which row is locked last). Returns the new scores of the subjects that moved.
 */
export async function applyReputationDeltas(tx: Em, deltas: ReputationDelta[], neutral: number, now: Date): Promise<Array<{ subject_type: string; subject_id: string; score: number }>> {
  const b = sqlParams();
  return runSql(tx, `with ${reputationCtes(b, deltas, neutral, now)} select subject_type, subject_id, score from rep_scores`, b.params);
}
