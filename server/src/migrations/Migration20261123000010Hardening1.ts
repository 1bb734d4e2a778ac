import { Migration } from '@mikro-orm/migrations';

/**
 * Hardening (issue 9): an Idempotency-Key in progress holds a renewable lease (so a key
 * whose request died with its process is reclaimable within seconds) owned by a token (so
 * a request that lost its lease cannot overwrite or free the new owner's row); lookups of
 * ingest reports by session id alone (the cross-project ingest guard).
 */
export class Migration20261123000010Hardening1 extends Migration {
  override name = 'Migration20261123000010Hardening1';

  override up(): void {
    this.addSql(`alter table idempotency_keys add column locked_until timestamptz, add column lock_owner text`);
    this.addSql(`create index ingest_log_session on ingest_log (session_id)`);
    this.addSql(`create index ingested_sessions_session on ingested_sessions (session_id)`);
  }
}
