import { Migration } from '@mikro-orm/migrations';

/**
 * The settle hot path's storage (issue 31; docs/settlement.md "Statement budget" and "Indexes
 * and foreign keys of the hot tables").
 *
 * - The receipt's JWS is stored once, in `receipts.jws`. `checkout_sessions.receipt_jws` goes
 *   (the session reads it by join on `receipt_id`), and a session's stored settle answer keeps
 *   `"receipt":null` in the receipt's place (settlement/outcome.ts `storedSettleBody` puts the
 *   JWS back, so a replay is byte for byte the first answer). Existing answers are rewritten the
 *   same way here, where their session's JWS is at hand; an answer that does not carry it as
 *   written stays as it is, and is replayed as it is.
 * - Foreign keys from the hot tables to `merchants` and `projects` go: every settle's rows copy
 *   their merchant and project from the session's merchant, read in the same transaction, and
 *   neither table has a delete; each check was an index probe and a KEY SHARE lock on the
 *   merchant's row (one row shared by all of a merchant's concurrent settles). The same for a
 *   delivery's endpoint (endpoints are deleted softly, `deleted_at`; the fan-out inserts only
 *   deliveries of live endpoints, which every settle of a project with an endpoint locked).
 * - `events_seq_key` goes: `seq` is an identity (generated always), and every read of it goes
 *   through `events_feed` with the project and mode.
 */
export class Migration20261126000031HotPath extends Migration {
  override name = 'Migration20261126000031HotPath';

  override up(): void {
    this.addSql(`update checkout_sessions set settle_response = replace(settle_response, '"receipt":' || to_json(receipt_jws)::text, '"receipt":null')
      where receipt_jws is not null and settle_status = 200 and settle_response like '{"status":"accepted",%'`);
    this.addSql(`alter table checkout_sessions drop column receipt_jws`);
    this.addSql(`alter table checkout_sessions drop constraint checkout_sessions_merchant_id_fkey`);
    this.addSql(`alter table orders drop constraint orders_merchant_id_fkey, drop constraint orders_project_id_fkey`);
    this.addSql(`alter table receipts drop constraint receipts_merchant_id_fkey`);
    this.addSql(`alter table events drop constraint events_merchant_id_fkey, drop constraint events_project_id_fkey, drop constraint events_seq_key`);
    this.addSql(`alter table settlement_attempts drop constraint settlement_attempts_merchant_id_fkey`);
    this.addSql(`alter table webhook_deliveries drop constraint webhook_deliveries_endpoint_id_fkey`);
  }

  override down(): void {
    this.addSql(`alter table webhook_deliveries add constraint webhook_deliveries_endpoint_id_fkey foreign key (endpoint_id) references webhook_endpoints(id)`);
    this.addSql(`alter table settlement_attempts add constraint settlement_attempts_merchant_id_fkey foreign key (merchant_id) references merchants(id)`);
    this.addSql(`alter table events add constraint events_merchant_id_fkey foreign key (merchant_id) references merchants(id),
      add constraint events_project_id_fkey foreign key (project_id) references projects(id), add constraint events_seq_key unique (seq)`);
    this.addSql(`alter table receipts add constraint receipts_merchant_id_fkey foreign key (merchant_id) references merchants(id)`);
    this.addSql(`alter table orders add constraint orders_merchant_id_fkey foreign key (merchant_id) references merchants(id),
      add constraint orders_project_id_fkey foreign key (project_id) references projects(id)`);
    this.addSql(`alter table checkout_sessions add constraint checkout_sessions_merchant_id_fkey foreign key (merchant_id) references merchants(id)`);
    this.addSql(`alter table checkout_sessions add column receipt_jws text`);
    this.addSql(`update checkout_sessions s set receipt_jws = r.jws from receipts r where r.id = s.receipt_id`);
    this.addSql(`update checkout_sessions s set settle_response = replace(s.settle_response, '"receipt":null', '"receipt":' || to_json(s.receipt_jws)::text)
      where s.receipt_jws is not null and s.settle_status = 200 and s.settle_response like '{"status":"accepted",%'`);
  }
}
