import { Migration } from '@mikro-orm/migrations';

/** Ingest from self-hosted deployments: upserted sessions and the idempotency log of reports. */
export class Migration20261121000004Ingest extends Migration {
  override name = 'Migration20261121000004Ingest';

  override up(): void {
    this.addSql(`create table ingested_sessions (
      project_id text not null references projects(id),
      livemode boolean not null,
      session_id text not null,
      merchant_id text references merchants(id),
      payload jsonb not null,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      primary key (project_id, livemode, session_id)
    )`);
    this.addSql(`create table ingest_log (
      project_id text not null references projects(id),
      livemode boolean not null,
      kind text not null check (kind in ('order', 'decision')),
      session_id text not null,
      agent_id text not null,
      merchant_id text references merchants(id),
      decision text,
      order_id text,
      receipt_id text,
      created_at timestamptz not null default now(),
      primary key (project_id, livemode, kind, session_id)
    )`);
  }
}
