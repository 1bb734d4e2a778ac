import { Migration } from '@mikro-orm/migrations';

/**
 * No hot row per merchant (issue 31; docs/decisions.md, "A merchant's score has no hot row").
 * A settle no longer updates the merchant's `reputation` row: its `settled_merchant` event (a row
 * of its own per session) is the score, counted on read. What a read answers does not change:
 *
 * - An existing merchant row becomes the merchant's frozen base: its score as it is, and
 *   `outcomes` set to the number of the merchant's shared `settled_merchant` events it already
 *   holds, so the read (base score + 2 per event beyond those, clamped to 0..1000) gives exactly
 *   the stored score now, and exactly what the old code would have stored after any number of
 *   further settles (the deltas are all +2, so the clamp is path-independent). A server on the
 *   old code still running keeps row and events in step (it adds 2 and 1 to the row with each
 *   event), so the sum stays right during a rolling deploy.
 * - A partial index over the merchants' shared events keeps that count to an index range,
 *   stopped at the events that take the base to 1000 (250 from 500; a base at 1000 is not
 *   counted at all).
 */
export class Migration20261126000032MerchantReputationEvents extends Migration {
  override name = 'Migration20261126000032MerchantReputationEvents';

  override up(): void {
    this.addSql(`create index reputation_events_merchant_settled on reputation_events (livemode, subject_id)
      where subject_type = 'merchant' and project_id is null and reason = 'settled_merchant'`);
    this.addSql(`update reputation r set outcomes = (
        select count(*) from reputation_events e
        where e.livemode = r.livemode and e.subject_type = 'merchant' and e.subject_id = r.subject_id
          and e.project_id is null and e.reason = 'settled_merchant')
      where r.subject_type = 'merchant'`);
  }

  override down(): void {
    // back to one row per merchant moved by every settle: fold the events past the base into it
    this.addSql(`update reputation r set score = least(1000, greatest(0, r.score + 2 * (c.n - r.outcomes))), outcomes = c.n
      from (select livemode, subject_id, count(*)::int as n from reputation_events
            where subject_type = 'merchant' and project_id is null and reason = 'settled_merchant' group by 1, 2) c
      where r.subject_type = 'merchant' and c.livemode = r.livemode and c.subject_id = r.subject_id`);
    this.addSql(`insert into reputation (livemode, subject_type, subject_id, score, outcomes, updated_at)
      select livemode, 'merchant', subject_id, least(1000, 500 + 2 * count(*)::int), count(*)::int, max(created_at) from reputation_events
      where subject_type = 'merchant' and project_id is null and reason = 'settled_merchant'
      group by livemode, subject_id
      on conflict (livemode, subject_type, subject_id) do nothing`);
    this.addSql(`drop index reputation_events_merchant_settled`);
  }
}
