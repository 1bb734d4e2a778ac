import { Migration } from '@mikro-orm/migrations';

/**
 * The settlement engine (docs/settlement.md): one durable attempt per accepted payment, the
 * transactions that may carry it, and the constraints behind "funds moved <=> exactly one
 * order, one receipt and one order.settled".
 */
export class Migration20261123000001Settlement extends Migration {
  override name = 'Migration20261123000001Settlement';

  override up(): void {
    this.addSql(`alter table checkout_sessions drop constraint checkout_sessions_state_check`);
    this.addSql(`alter table checkout_sessions add constraint checkout_sessions_state_check
      check (state in ('awaiting_payment', 'settling', 'accepted', 'rejected', 'held', 'approved', 'expired'))`);
    // The gate's inputs and verdict, kept while a session is held so approval captures exactly what was gated.
    this.addSql(`alter table checkout_sessions add column gate jsonb`);
    this.addSql(`alter table checkout_sessions add column payment_error jsonb`);

    this.addSql(`create table settlement_attempts (
      id text primary key,
      session_id text not null references checkout_sessions(id),
      merchant_id text not null references merchants(id),
      livemode boolean not null,
      return_state text not null check (return_state in ('awaiting_payment', 'held', 'approved')),
      rail text not null,
      facilitator text not null,
      chain text,
      payer text,
      nonce text,
      amount_base_units text,
      proof jsonb,
      payment_hash text not null,
      status text not null check (status in ('pending', 'settled', 'failed')),
      reference text,
      failure_code text,
      failure_human text,
      lease_until timestamptz not null,
      created_at timestamptz not null default now(),
      resolved_at timestamptz,
      constraint settlement_attempts_settled_ref check (status <> 'settled' or reference is not null),
      constraint settlement_attempts_failed_code check (status <> 'failed' or failure_code is not null),
      constraint settlement_attempts_id_status unique (id, status)
    )`);
    // One live attempt per authorization and per session: a second process can never start another.
    this.addSql(`create unique index settlement_attempts_authorization on settlement_attempts (chain, payer, nonce)
      where status <> 'failed' and nonce is not null`);
    this.addSql(`create unique index settlement_attempts_open on settlement_attempts (session_id) where status <> 'failed'`);
    this.addSql(`create index settlement_attempts_unresolved on settlement_attempts (lease_until) where status = 'pending'`);

    this.addSql(`create table settlement_transactions (
      tx_hash text primary key,
      attempt_id text not null references settlement_attempts(id),
      raw_tx text,
      relayer text,
      relayer_nonce bigint,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create index settlement_transactions_attempt on settlement_transactions (attempt_id, created_at)`);

    // An accepted hosted order points at its attempt, which must be (and stay) settled.
    this.addSql(`alter table orders add column settlement_attempt_id text`);
    this.addSql(`alter table orders add column settlement_status text check (settlement_status = 'settled')`);
    this.addSql(`alter table orders add constraint orders_settlement_attempt unique (settlement_attempt_id)`);
    this.addSql(`alter table orders add constraint orders_settlement_attempt_fk foreign key (settlement_attempt_id, settlement_status)
      references settlement_attempts (id, status)`);
    this.addSql(`alter table orders add constraint orders_hosted_accept_settled
      check (source <> 'hosted' or decision <> 'accept' or (settlement_attempt_id is not null and settlement_status = 'settled')) not valid`);
    this.addSql(`create unique index receipts_order on receipts (order_id)`);
    this.addSql(`create unique index events_one_settled_per_order on events ((payload -> 'data' -> 'object' ->> 'id')) where type = 'order.settled'`);
  }
}
