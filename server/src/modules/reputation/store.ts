import type { Em, Orm } from '../../db/orm.js';
import { runSql, sqlParams, type SqlParams } from '../../db/sql.js';

/**
 * Data access for `reputation`, `reputation_events` and `reputation_adjustments` (SQL only: a
 * delta is applied at most once with an insert-or-nothing on the event's primary key, and the
 * score moves with one atomic, clamped upsert; both run on the settle path).
 *
 * Every row belongs to one mode (`livemode`). `reputation` holds the shared score of a mode,
 * moved only by outcomes the service observed itself; `reputation_adjustments` holds what one
 * project's ingest reports added to it, read only by that project (docs/decisions.md).
 *
 * A merchant has no row a settle writes (no hot row: every sale of a merchant would queue on
 * it). Its shared score only ever moves by `MERCHANT_SETTLED_DELTA` per settled order, clamped to
 * 0..1000, so it depends only on how many there were: a settle records its `settled_merchant`
 * event (a row of its own, keyed by the session) and the score is counted on read
 * (`sharedScoreSql`), no further than the events that take it to 1000 past the merchant's frozen base row
 * (`reputation`, written by Migration20261126000032 for merchants scored before; never again).
 */

/** Where every score starts. */
export const NEUTRAL_SCORE = 500;
/** A merchant's shared score moves by this for each settled order, and by nothing else. */
export const MERCHANT_SETTLED_DELTA = 2;

/**
 * SQL for the shared score of a subject in a mode (null: never scored), from SQL expressions for
 * the mode, the subject type and the subject id. An agent's is its `reputation` row; a
 * merchant's is its base row (score and the events folded into it; neutral and 0 without one)
 * plus `MERCHANT_SETTLED_DELTA` per `settled_merchant` event beyond those, clamped to 0..1000.
 * Past the base, the count stops at the events that take the base to 1000 (250 from the
 * neutral 500; none for a base at 1000), so a read costs at most that many index entries.
 */
export function sharedScoreSql(livemode: string, subjectType: string, subjectId: string): string {
  return `(case when ${subjectType} = 'merchant' then ${merchantScoreSql(livemode, subjectId)}
           else (select score from reputation where livemode = ${livemode} and subject_type = ${subjectType} and subject_id = ${subjectId}) end)`;
}

function merchantScoreSql(livemode: string, merchantId: string): string {
  return `(select case when b.score is null and c.n = 0 then null
                  when b.score >= 1000 then 1000
                  else least(1000, greatest(0, coalesce(b.score, ${NEUTRAL_SCORE}) + ${MERCHANT_SETTLED_DELTA} * (c.n - coalesce(b.outcomes, 0)))) end
           from (select 1) one
           left join reputation b on b.livemode = ${livemode} and b.subject_type = 'merchant' and b.subject_id = ${merchantId}
           cross join lateral (
             select count(*)::int as n from (
               select 1 from reputation_events e
               where e.livemode = ${livemode} and e.subject_type = 'merchant' and e.subject_id = ${merchantId}
                 and e.project_id is null and e.reason = 'settled_merchant'
               limit case when b.score >= 1000 then 0
                          else coalesce(b.outcomes, 0) + ceil((1000 - coalesce(b.score, ${NEUTRAL_SCORE})) / ${MERCHANT_SETTLED_DELTA}.0)::int end) x) c)`;
}

/** An EntityManager of the read's own: a lookup that times out leaves nothing half-used on the request's. */
export function ownEntityManager(orm: Orm): Em {
  return orm.em.fork();
}

/** Whose score is read: the shared score of a mode, or one project's view of it (plus its own reports). */
export type ReputationView = { livemode: boolean; projectId: string | null };

/** A subject's stored shared score and the viewer's adjustment (null: no row). */
export type StoredReputation = { score: number | null; adjustment: number | null };

export async function findReputation(em: Em, view: ReputationView, subjectType: string, subjectId: string): Promise<StoredReputation> {
  const rows = await runSql<{ score: number | null; adjustment: number | null }>(
    em,
    `select ${sharedScoreSql('$1::boolean', '$2::text', '$3::text')} as score,
            (select adjustment from reputation_adjustments where project_id = $4 and livemode = $1 and subject_type = $2 and subject_id = $3) as adjustment`,
    [view.livemode, subjectType, subjectId, view.projectId],
  );
  return storedOf(rows[0]);
}

/**
 * A merchant's score, in the merchant's own mode (a merchant id belongs to one mode); the
 * viewer's adjustment counts when the viewer is a project. Undefined: no such merchant.
 */
export async function findMerchantReputation(em: Em, viewerProjectId: string | null, merchantId: string): Promise<StoredReputation | undefined> {
  const rows = await runSql<{ score: number | null; adjustment: number | null }>(
    em,
    `select ${merchantScoreSql('m.livemode', 'm.id')} as score,
            (select adjustment from reputation_adjustments a
              where a.project_id = $2 and a.livemode = m.livemode and a.subject_type = 'merchant' and a.subject_id = m.id) as adjustment
     from merchants m where m.id = $1`,
    [merchantId, viewerProjectId],
  );
  return rows[0] ? storedOf(rows[0]) : undefined;
}

const storedOf = (r: { score: number | null; adjustment: number | null } | undefined): StoredReputation => ({
  score: r?.score === null || r?.score === undefined ? null : Number(r.score),
  adjustment: r?.adjustment === null || r?.adjustment === undefined ? null : Number(r.adjustment),
});

export type ReputationDelta = { sessionId: string; livemode: boolean; subjectType: string; subjectId: string; delta: number; reason: string };

/**
 * The CTEs that apply reputation deltas to the shared score of their mode, for a statement of
 * the caller's: each (mode, session, subject, reason) counts once (`reputation_events` is unique
 * on it), and only what was newly recorded moves a score, clamped to 0..1000, from `neutral` for
 * a new subject. They end in `rep_scores(livemode, subject_type, subject_id, score)`: the new
 * scores of the agents that moved. A merchant's `settled_merchant` is recorded as its event
 * only, which is its score (`sharedScoreSql`): no row of the merchant is written or locked, so
 * concurrent settles of one merchant never wait on each other here. `guard`, an SQL condition,
 * keeps every delta out unless it holds. Values are bound through `b`.
 */
export function reputationCtes({ $ }: SqlParams, deltas: ReputationDelta[], neutral: number, now: Date, guard = 'true'): string {
  for (const d of deltas) {
    if (d.subjectType === 'merchant' && (d.reason !== 'settled_merchant' || d.delta !== MERCHANT_SETTLED_DELTA)) {
      throw new Error(`a merchant's shared score moves only by settled_merchant (+${MERCHANT_SETTLED_DELTA}), not ${d.reason} (${d.delta})`);
    }
  }
  const $neutral = `${$(neutral)}::int`;
  const $now = `${$(now)}::timestamptz`;
  const values = deltas
    .map((d, i) => `(${i}, ${$(d.livemode)}::boolean, ${$(d.sessionId)}::text, ${$(d.subjectType)}::text, ${$(d.subjectId)}::text, ${$(d.delta)}::int, ${$(d.reason)}::text)`)
    .join(', ');
  return `rep_d (ord, livemode, session_id, subject_type, subject_id, delta, reason) as (select * from (values ${values}) as v where ${guard}),
     rep_events as (
       insert into reputation_events (livemode, session_id, subject_type, subject_id, delta, reason, created_at)
       select livemode, session_id, subject_type, subject_id, delta, reason, ${$now} from rep_d order by ord
       on conflict do nothing returning livemode, session_id, subject_type, subject_id, reason),
     rep_scores as (
       insert into reputation (livemode, subject_type, subject_id, score, outcomes, updated_at)
       select d.livemode, d.subject_type, d.subject_id, least(1000, greatest(0, ${$neutral} + d.delta)), 1, ${$now}
       from rep_d d join rep_events i using (livemode, session_id, subject_type, subject_id, reason)
       where d.subject_type <> 'merchant'
       order by d.ord
       on conflict (livemode, subject_type, subject_id) do update
         set score = least(1000, greatest(0, reputation.score + excluded.score - ${$neutral})), outcomes = reputation.outcomes + 1, updated_at = excluded.updated_at
       returning livemode, subject_type, subject_id, score)`;
}

/**
 * Outcomes of one session in one statement (`reputationCtes`), in the order given. Returns the
 * new scores of the agents that moved (a merchant's is read with `sharedScoreSql`).
 */
export async function applyReputationDeltas(tx: Em, deltas: ReputationDelta[], neutral: number, now: Date): Promise<Array<{ subject_type: string; subject_id: string; score: number }>> {
  const b = sqlParams();
  return runSql(tx, `with ${reputationCtes(b, deltas, neutral, now)} select subject_type, subject_id, score from rep_scores`, b.params);
}

/**
 * One delta of a project's ingest report: recorded once in `reputation_events` (with the
 * project), it moves only that project's adjustment (bounded to ±1000), never the shared score.
 * One statement; answers the subject's stored score and the new adjustment, or undefined when
 * this (mode, session, subject type, reason) was recorded before (nothing moved).
 */
export async function applyProjectReputationDelta(tx: Em, projectId: string, d: ReputationDelta, now: Date): Promise<StoredReputation | undefined> {
  const rows = await runSql<{ score: number | null; adjustment: number }>(
    tx,
    `with ev as (
       insert into reputation_events (livemode, session_id, subject_type, subject_id, delta, reason, project_id, created_at)
       values ($1, $2, $3, $4, $5, $6, $7, $8)
       on conflict do nothing returning livemode, subject_type, subject_id, delta),
     adj as (
       insert into reputation_adjustments (project_id, livemode, subject_type, subject_id, adjustment, outcomes, updated_at)
       select $7, livemode, subject_type, subject_id, delta, 1, $8 from ev
       on conflict (project_id, livemode, subject_type, subject_id) do update
         set adjustment = least(1000, greatest(-1000, reputation_adjustments.adjustment + excluded.adjustment)),
             outcomes = reputation_adjustments.outcomes + 1, updated_at = excluded.updated_at
       returning adjustment)
     select ${sharedScoreSql('$1::boolean', '$3::text', '$4::text')} as score, adj.adjustment from adj`,
    [d.livemode, d.sessionId, d.subjectType, d.subjectId, d.delta, d.reason, projectId, now],
  );
  return rows[0] ? storedOf(rows[0]) : undefined;
}
