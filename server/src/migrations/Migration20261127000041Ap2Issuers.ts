import { Migration } from '@mikro-orm/migrations';

/** The AP2 issuers a merchant trusts (issue 28; docs/decisions.md "AP2 mandates"): JWKS URLs, none by default. */
export class Migration20261127000041Ap2Issuers extends Migration {
  override name = 'Migration20261127000041Ap2Issuers';

  override async up(): Promise<void> {
    this.addSql(`alter table merchants add column if not exists trusted_ap2_issuers jsonb not null default '[]'::jsonb`);
  }

  override async down(): Promise<void> {
    this.addSql('alter table merchants drop column if exists trusted_ap2_issuers');
  }
}
