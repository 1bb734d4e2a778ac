import { Migration } from '@mikro-orm/migrations';

/**
 * API-key management (/v1/keys): a rolled key keeps working until `expires_at` (its grace
 * period) and names the key that replaced it; one roll per key (unique `rolled_to`).
 */
export class Migration20261123000040Keys extends Migration {
  override name = 'Migration20261123000040Keys';

  override up(): void {
    this.addSql('alter table api_keys add column expires_at timestamptz, add column rolled_to text references api_keys (id)');
    this.addSql('create unique index api_keys_rolled_to_unique on api_keys (rolled_to) where rolled_to is not null');
    this.addSql('create index api_keys_project_mode_id on api_keys (project_id, mode, id)');
  }

  override down(): void {
    this.addSql('drop index api_keys_project_mode_id');
    this.addSql('drop index api_keys_rolled_to_unique');
    this.addSql('alter table api_keys drop column rolled_to, drop column expires_at');
  }
}
