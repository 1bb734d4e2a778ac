import { Migration } from '@mikro-orm/migrations';

/**
 * Refunds (issue 26; docs/settlement.md "Refunds"), the settlement module's second workflow.
 *
 * - `refunds`: one row per refund of a settled x402 payment (`settlement_attempt_id`, the
 *   capture); the EIP-3009 authorization it asks the merchant to sign (from, to, value, window,
 *   nonce, unique per signer like on chain), then the signature, the transfer and its receipt.
 * - The invariant "a capture's awaiting, pending and succeeded refunds never exceed what it
 *   captured" is the database's: the trigger `refunds_within_capture` locks the capture's
 *   attempt row (FOR NO KEY UPDATE, so the foreign-key checks' KEY SHARE locks never deadlock
 *   with it) and then sums, so concurrent writers of one order's refunds run one after the
 *   other and each sums what the previous one committed (read committed: the sum is a new
 *   statement after the lock). Over the limit it raises check_violation naming the trigger.
 * - `refund_transactions`: like `settlement_transactions`, every transaction a live facilitator
 *   is about to send for a refund, stored first.
 * - `orders.amount_refunded`: the order's succeeded refunds, kept by the refund's success in the
 *   same transaction (the order projection's amount_refunded and refund_status).
 * - One outcome event per refund: `refund.succeeded` or `refund.failed`, once (unique index).
 * - Keys that held every scope before (standard keys) get the new refunds scopes.
 */
export class Migration20261126000030Refunds extends Migration {
  override name = 'Migration20261126000030Refunds';

  override up(): void {
    this.addSql(`alter table orders add column amount_refunded numeric not null default 0`);
    this.addSql(`create table refunds (
      id text primary key,
      order_id text not null references orders(id),
      settlement_attempt_id text not null references settlement_attempts(id),
      project_id text not null references projects(id),
      merchant_id text not null references merchants(id),
      livemode boolean not null,
      status text not null,
      amount text not null,
      amount_base_units numeric(78, 0) not null,
      currency text not null,
      reason text,
      metadata jsonb,
      chain text not null,
      from_address text not null,
      to_address text not null,
      nonce text not null,
      valid_after bigint not null,
      valid_before bigint not null,
      signature text,
      facilitator text,
      reference text,
      failure_code text,
      failure_human text,
      receipt_jws text,
      lease_until timestamptz,
      created_at timestamptz not null,
      updated_at timestamptz not null,
      resolved_at timestamptz,
      constraint refunds_status check (status in ('requires_authorization', 'pending', 'succeeded', 'failed', 'canceled')),
      constraint refunds_amount_positive check (amount_base_units > 0),
      constraint refunds_reason check (reason is null or reason in ('requested_by_customer', 'duplicate', 'fraudulent', 'other')),
      constraint refunds_succeeded_has_transfer check (status <> 'succeeded' or (reference is not null and receipt_jws is not null)),
      constraint refunds_signed_once_authorized check (status in ('requires_authorization', 'canceled') or signature is not null),
      constraint refunds_authorization_unique unique (chain, from_address, nonce)
    )`);
    this.addSql(`create index refunds_order on refunds (order_id, id desc)`);
    this.addSql(`create index refunds_scope on refunds (project_id, livemode, id desc)`);
    this.addSql(`create index refunds_capture on refunds (settlement_attempt_id) where status in ('requires_authorization', 'pending', 'succeeded')`);
    this.addSql(`create index refunds_due on refunds (lease_until) where status in ('requires_authorization', 'pending')`);
    this.addSql(`create table refund_transactions (
      tx_hash text primary key,
      refund_id text not null references refunds(id),
      raw_tx text,
      relayer text,
      relayer_nonce bigint,
      created_at timestamptz not null
    )`);
    this.addSql(`create index refund_transactions_refund on refund_transactions (refund_id, created_at)`);
    this.addSql(`create function svc_refunds_within_capture() returns trigger language plpgsql as $$
declare
  captured numeric;
  reserved numeric;
begin
  select amount_base_units::numeric into captured from settlement_attempts
   where id = new.settlement_attempt_id and status = 'settled' for no key update;
  select coalesce(sum(amount_base_units), 0) into reserved from refunds
   where settlement_attempt_id = new.settlement_attempt_id and status in ('requires_authorization', 'pending', 'succeeded');
  if captured is null or reserved > captured then
    raise exception 'refunds_within_capture: refunds of capture % would reach % base units, over the % captured', new.settlement_attempt_id, reserved, coalesce(captured, 0)
      using errcode = 'check_violation', constraint = 'refunds_within_capture';
  end if;
  return null;
end $$`);
    this.addSql(`create trigger refunds_within_capture after insert or update of status, amount_base_units on refunds
      for each row when (new.status in ('requires_authorization', 'pending', 'succeeded')) execute function svc_refunds_within_capture()`);
    this.addSql(`create unique index events_one_outcome_per_refund on events ((payload -> 'data' -> 'object' ->> 'id'))
      where type in ('refund.succeeded', 'refund.failed')`);
    this.addSql(`update api_keys set scopes = scopes || '["refunds:read", "refunds:write"]'::jsonb
      where scopes @> '["merchants:read", "merchants:write", "products:read", "products:write", "policy:read", "policy:write", "orders:read", "orders:write", "ingest:write", "webhooks:read", "webhooks:write", "keys:read", "keys:write"]'::jsonb`);
  }
}
