import { Migration } from '@mikro-orm/migrations';

/** Agent protocol: sessions, replay guards, orders, receipts, reputation, rate limits, the event outbox. */
export class Migration20261121000002AgentProtocol extends Migration {
  override name = 'Migration20261121000002AgentProtocol';

  override up(): void {
    this.addSql(`create table checkout_sessions (
      id text primary key,
      merchant_id text not null references merchants(id),
      livemode boolean not null,
      agent_id uuid not null,
      state text not null check (state in ('awaiting_payment', 'settling', 'accepted', 'rejected', 'held', 'expired')),
      lines jsonb not null,
      currency text not null,
      subtotal text not null,
      tax text not null,
      total text not null,
      amount_base_units text,
      rail text not null,
      pay_to text,
      chain text,
      asset text,
      buyer jsonb,
      buyer_intent text,
      mandate jsonb,
      path_prefix text not null,
      idempotency_key text,
      request_hash text not null,
      create_response text,
      payment jsonb,
      verdict jsonb,
      settle_payment_hash text,
      settle_status integer,
      settle_response text,
      order_id text,
      receipt_id text,
      receipt_jws text,
      settlement_ref text,
      policy_version integer,
      policy_hash text,
      created_at timestamptz not null default now(),
      expires_at timestamptz not null,
      settled_at timestamptz,
      hold_expires_at timestamptz
    )`);
    this.addSql(`create unique index checkout_sessions_agent_idem on checkout_sessions (agent_id, idempotency_key) where idempotency_key is not null`);
    this.addSql(`create index checkout_sessions_velocity on checkout_sessions (merchant_id, agent_id, created_at)`);
    this.addSql(`create table payment_nonces (
      chain text not null,
      payer text not null,
      nonce text not null,
      session_id text not null references checkout_sessions(id),
      created_at timestamptz not null default now(),
      primary key (chain, payer, nonce)
    )`);
    this.addSql(`create table mandate_subjects (
      issuer text not null,
      subject text not null,
      session_id text not null references checkout_sessions(id),
      created_at timestamptz not null default now(),
      primary key (issuer, subject)
    )`);
    this.addSql(`create table orders (
      id text primary key,
      session_id text not null,
      project_id text not null references projects(id),
      merchant_id text not null references merchants(id),
      livemode boolean not null,
      agent_id text not null,
      decision text not null check (decision in ('accept', 'reject', 'hold')),
      total jsonb,
      items jsonb not null default '[]',
      rail_name text not null,
      settlement_ref text,
      receipt_id text,
      mandate_type text not null,
      mandate_ref text,
      trust_tier text not null,
      buyer jsonb,
      source text not null default 'hosted',
      created_at timestamptz not null default now(),
      constraint orders_session unique (session_id)
    )`);
    this.addSql(`create index orders_feed on orders (project_id, livemode, id desc)`);
    this.addSql(`create table receipts (
      id text primary key,
      order_id text not null references orders(id),
      session_id text not null,
      merchant_id text not null references merchants(id),
      jws text not null,
      claims jsonb not null,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create table reputation (
      subject_type text not null check (subject_type in ('agent', 'merchant')),
      subject_id text not null,
      score integer not null check (score between 0 and 1000),
      outcomes integer not null default 0,
      updated_at timestamptz not null default now(),
      primary key (subject_type, subject_id)
    )`);
    this.addSql(`create table reputation_events (
      session_id text not null,
      subject_type text not null,
      subject_id text not null,
      delta integer not null,
      reason text not null,
      created_at timestamptz not null default now(),
      primary key (session_id, subject_type, reason)
    )`);
    this.addSql(`create table rate_limit_buckets (
      bucket text not null,
      window_start timestamptz not null,
      hits integer not null,
      primary key (bucket, window_start)
    )`);
    this.addSql(`create table events (
      seq bigint generated always as identity unique,
      id text primary key,
      project_id text not null references projects(id),
      merchant_id text references merchants(id),
      livemode boolean not null,
      type text not null,
      payload jsonb not null,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create index events_feed on events (project_id, livemode, seq desc)`);
  }
}
