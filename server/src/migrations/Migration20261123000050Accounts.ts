import { Migration } from '@mikro-orm/migrations';

/**
 * Merchant accounts: users by email, membership in organizations, single-use sign-in links,
 * device codes (RFC 8628) and browser sessions. Every secret (link token, device code,
 * session token) is stored as its SHA-256 only.
 */
export class Migration20261123000050Accounts extends Migration {
  override name = 'Migration20261123000050Accounts';

  override up(): void {
    this.addSql(`create table users (
      id text primary key,
      email text not null,
      created_at timestamptz not null
    )`);
    this.addSql('create unique index users_email_unique on users (lower(email))');
    this.addSql(`create table memberships (
      user_id text not null references users (id),
      organization_id text not null references organizations (id),
      role text not null default 'owner' check (role in ('owner', 'member')),
      created_at timestamptz not null,
      primary key (user_id, organization_id)
    )`);
    this.addSql(`create table device_codes (
      id text primary key,
      device_code_hash text not null unique,
      user_code text not null,
      status text not null check (status in ('pending', 'approved', 'delivered')),
      interval_seconds integer not null check (interval_seconds > 0),
      expires_at timestamptz not null,
      last_polled_at timestamptz,
      user_id text references users (id),
      project_id text references projects (id),
      key_id text references api_keys (id),
      created_at timestamptz not null,
      check ((status = 'pending') = (user_id is null)),
      check ((status = 'delivered') = (key_id is not null))
    )`);
    this.addSql(`create unique index device_codes_user_code_pending on device_codes (user_code) where status = 'pending'`);
    this.addSql(`create table sign_in_tokens (
      id text primary key,
      token_hash text not null unique,
      email text not null,
      device_code_id text references device_codes (id),
      expires_at timestamptz not null,
      used_at timestamptz,
      created_at timestamptz not null
    )`);
    this.addSql(`create table user_sessions (
      id text primary key,
      token_hash text not null unique,
      user_id text not null references users (id),
      created_at timestamptz not null,
      expires_at timestamptz not null,
      revoked_at timestamptz
    )`);
    this.addSql('create index user_sessions_user on user_sessions (user_id)');
  }

  override down(): void {
    this.addSql('drop table user_sessions');
    this.addSql('drop table sign_in_tokens');
    this.addSql('drop table device_codes');
    this.addSql('drop table memberships');
    this.addSql('drop table users');
  }
}
