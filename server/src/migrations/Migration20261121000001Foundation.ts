import { Migration } from '@mikro-orm/migrations';

/** Foundation: accounts, keys, merchants, catalog, policy versions, idempotency. */
export class Migration20261121000001Foundation extends Migration {
  override name = 'Migration20261121000001Foundation';

  override up(): void {
    this.addSql(`create table organizations (
      id text primary key,
      name text not null,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create table projects (
      id text primary key,
      organization_id text not null references organizations(id),
      name text not null,
      is_default boolean not null default false,
      created_at timestamptz not null default now()
    )`);
    this.addSql(`create unique index projects_one_default on projects ((true)) where is_default`);
    this.addSql(`create table api_keys (
      id text primary key,
      project_id text not null references projects(id),
      mode text not null check (mode in ('test', 'live')),
      name text,
      lookup text not null unique,
      secret_hash text not null,
      last4 text not null,
      scopes jsonb not null,
      created_at timestamptz not null default now(),
      revoked_at timestamptz,
      last_used_at timestamptz
    )`);
    this.addSql(`create table merchants (
      id text primary key,
      project_id text not null references projects(id),
      livemode boolean not null,
      slug text not null,
      name text not null,
      domain text not null,
      receiving jsonb not null,
      rails jsonb not null,
      receipt_kid text not null,
      receipt_public_x text not null,
      receipt_seed_sealed text not null,
      trusted_svc_jwks_url text,
      is_default boolean not null default false,
      config_version integer not null default 1,
      published_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now()
    )`);
    this.addSql(`create unique index merchants_slug_mode on merchants (slug, livemode)`);
    this.addSql(`create unique index merchants_one_default on merchants (project_id, livemode) where is_default`);
    this.addSql(`create index merchants_project_mode_id on merchants (project_id, livemode, id desc)`);
    this.addSql(`create index merchants_domain on merchants (domain)`);
    this.addSql(`create table catalog_items (
      id text primary key,
      merchant_id text not null references merchants(id),
      sku text not null,
      name text not null,
      price_amount text not null check (price_amount ~ '^[0-9]{1,12}([.][0-9]{1,8})?$'),
      currency text not null check (currency ~ '^[A-Z]{3}$'),
      available boolean not null default true,
      description text,
      category text,
      unit text,
      metadata jsonb,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      constraint catalog_items_merchant_sku unique (merchant_id, sku)
    )`);
    this.addSql(`create table policy_versions (
      id text primary key,
      merchant_id text not null references merchants(id),
      version integer not null check (version > 0),
      body jsonb not null,
      hash text not null,
      active boolean not null default false,
      note text,
      created_at timestamptz not null default now(),
      activated_at timestamptz,
      constraint policy_versions_merchant_version unique (merchant_id, version)
    )`);
    this.addSql(`create unique index policy_versions_one_active on policy_versions (merchant_id) where active`);
    this.addSql(`create table idempotency_keys (
      id text primary key,
      scope_key text not null,
      idem_key text not null,
      request_hash text not null,
      status integer,
      response text,
      created_at timestamptz not null default now(),
      constraint idempotency_keys_scope_key unique (scope_key, idem_key)
    )`);
  }
}
