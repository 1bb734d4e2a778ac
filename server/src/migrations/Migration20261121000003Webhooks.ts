import { Migration } from '@mikro-orm/migrations';

/**
 * Webhooks: endpoints, the exact bytes of each event, and the delivery queue
 * (claimed with FOR UPDATE SKIP LOCKED and a lease) with one row per attempt.
 */
export class Migration20261121000003Webhooks extends Migration {
  override name = 'Migration20261121000003Webhooks';

  override up(): void {
    this.addSql(`create table webhook_endpoints (
      id text primary key,
      project_id text not null references projects(id),
      livemode boolean not null,
      url text not null,
      enabled_events jsonb not null,
      description text,
      status text not null check (status in ('pending', 'enabled', 'disabled')),
      disabled_reason text check (disabled_reason in ('manual', 'failing')),
      secret_sealed text not null,
      previous_secret_sealed text,
      previous_secret_expires_at timestamptz,
      failing_since timestamptz,
      last_success_at timestamptz,
      deleted_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create index webhook_endpoints_fanout on webhook_endpoints (project_id, livemode) where deleted_at is null`);
    this.addSql(`create index webhook_endpoints_list on webhook_endpoints (project_id, livemode, id desc) where deleted_at is null`);
    // The serialized envelope, written once with the event: every attempt and replay sends these bytes.
    this.addSql(`create table webhook_event_bodies (
      event_id text primary key references events(id),
      body text not null
    )`);
    this.addSql(`create table webhook_deliveries (
      id bigint generated always as identity primary key,
      event_id text not null references events(id),
      endpoint_id text not null references webhook_endpoints(id),
      replay boolean not null default false,
      status text not null check (status in ('pending', 'succeeded', 'failed', 'canceled')),
      attempt_count integer not null default 0 check (attempt_count between 0 and 7),
      enqueued_at timestamptz not null default now(),
      next_attempt_at timestamptz,
      locked_until timestamptz,
      lock_owner text,
      completed_at timestamptz
    )`);
    this.addSql(`create index webhook_deliveries_due on webhook_deliveries (next_attempt_at, id) where status = 'pending'`);
    this.addSql(`create index webhook_deliveries_event on webhook_deliveries (event_id)`);
    this.addSql(`create index webhook_deliveries_endpoint_pending on webhook_deliveries (endpoint_id) where status = 'pending'`);
    this.addSql(`create table webhook_attempts (
      id text primary key,
      delivery_id bigint not null references webhook_deliveries(id),
      event_id text not null,
      endpoint_id text not null,
      attempt_number integer not null check (attempt_number between 1 and 7),
      status text not null check (status in ('in_progress', 'succeeded', 'failed', 'lost')),
      response_status integer,
      duration_ms integer,
      error text,
      created_at timestamptz not null default now(),
      completed_at timestamptz
    )`);
    this.addSql(`create index webhook_attempts_delivery on webhook_attempts (delivery_id)`);
    this.addSql(`create index webhook_attempts_event on webhook_attempts (event_id)`);
  }
}
