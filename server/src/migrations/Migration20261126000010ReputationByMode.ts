import { Migration } from '@mikro-orm/migrations';

/**
 * Reputation per mode, and ingest reports kept to the project that sent them (docs/decisions.md,
 * "Reputation: per mode, and ingest counts only where it was reported").
 *
 * - `reputation` and `reputation_events` gain `livemode` in their keys: a test-mode delta can
 *   no longer reach a live score.
 * - `reputation_events.project_id` names the project whose ingest report made the delta; such a
 *   delta moves only that project's `reputation_adjustments` row (the project's own view), never
 *   the shared score of the mode.
 *
 * Existing rows came from both modes and from ingest. They are rebuilt from the event log, which
 * holds every delta ever applied: an event of a hosted checkout session takes the session's
 * mode; an event of an ingested session takes the mode and project of its `ingest_log` row; an
 * event whose session is neither (none exist: sessions and ingest reports are never deleted)
 * counts in test mode, so nothing of unknown origin reaches live. Shared scores are replayed in
 * event order with the 0..1000 clamp at each step (a recursive walk), exactly as they were
 * applied; a project's adjustment is the sum of its deltas bounded to ±1000.
 */
export class Migration20261126000010ReputationByMode extends Migration {
  override name = 'Migration20261126000010ReputationByMode';

  override up(): void {
    this.addSql(`alter table reputation_events add column livemode boolean, add column project_id text references projects(id)`);
    this.addSql(`update reputation_events e set livemode = s.livemode from checkout_sessions s where s.id = e.session_id`);
    this.addSql(`update reputation_events e set livemode = l.livemode, project_id = l.project_id
      from (select distinct on (session_id) session_id, project_id, livemode from ingest_log order by session_id, created_at) l
      where e.livemode is null and l.session_id = e.session_id`);
    this.addSql(`update reputation_events set livemode = false where livemode is null`);
    this.addSql(`alter table reputation_events alter column livemode set not null,
      drop constraint reputation_events_pkey, add primary key (livemode, session_id, subject_type, reason)`);

    // The shared scores, replayed per mode from the deltas the service observed itself.
    this.addSql(`create temporary table reputation_replay as
      select livemode, subject_type, subject_id, delta, created_at,
        row_number() over (partition by livemode, subject_type, subject_id order by created_at, session_id, reason)::int as n
      from reputation_events where project_id is null`);
    this.addSql(`create index reputation_replay_step on reputation_replay (livemode, subject_type, subject_id, n)`);
    this.addSql(`delete from reputation`);
    this.addSql(`alter table reputation add column livemode boolean not null,
      drop constraint reputation_pkey, add primary key (livemode, subject_type, subject_id)`);
    this.addSql(`insert into reputation (livemode, subject_type, subject_id, score, outcomes, updated_at)
      with recursive walk (livemode, subject_type, subject_id, n, score, at) as (
        select livemode, subject_type, subject_id, n, least(1000, greatest(0, 500 + delta)), created_at from reputation_replay where n = 1
        union all
        select e.livemode, e.subject_type, e.subject_id, e.n, least(1000, greatest(0, w.score + e.delta)), e.created_at
        from walk w join reputation_replay e
          on e.livemode = w.livemode and e.subject_type = w.subject_type and e.subject_id = w.subject_id and e.n = w.n + 1)
      select distinct on (livemode, subject_type, subject_id) livemode, subject_type, subject_id, score, n, at
      from walk order by livemode, subject_type, subject_id, n desc`);
    this.addSql(`drop table reputation_replay`);

    // Each project's own ingest reports: its view is the shared score plus its adjustment.
    this.addSql(`create table reputation_adjustments (
      project_id text not null references projects(id),
      livemode boolean not null,
      subject_type text not null check (subject_type in ('agent', 'merchant')),
      subject_id text not null,
      adjustment integer not null check (adjustment between -1000 and 1000),
      outcomes integer not null,
      updated_at timestamptz not null,
      primary key (project_id, livemode, subject_type, subject_id)
    )`);
    this.addSql(`insert into reputation_adjustments (project_id, livemode, subject_type, subject_id, adjustment, outcomes, updated_at)
      select project_id, livemode, subject_type, subject_id, greatest(-1000, least(1000, sum(delta)))::int, count(*)::int, max(created_at)
      from reputation_events where project_id is not null
      group by project_id, livemode, subject_type, subject_id`);
  }
}
