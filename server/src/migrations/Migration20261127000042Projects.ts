import { Migration } from '@mikro-orm/migrations';

/**
 * The default project belongs to the installation's first account (issue 29; docs/decisions.md,
 * "The default project belongs to the first account").
 *
 * - An index on memberships (organization_id): a first sign-in asks whether the default
 *   project's organization has any member (the primary key starts with user_id).
 * - An installation whose default project (made by `keys create`) has no member while accounts
 *   exist gives it to its first account (oldest user) as owner, so the person who signed in first
 *   sees what the CLI made; new installations decide it at the first sign-in instead.
 */
export class Migration20261127000042Projects extends Migration {
  override name = 'Migration20261127000042Projects';

  override up(): void {
    this.addSql('create index memberships_organization_idx on memberships (organization_id)');
    this.addSql(`insert into memberships (user_id, organization_id, role, created_at)
      select u.id, p.organization_id, 'owner', now()
      from projects p, lateral (select id from users order by created_at, id limit 1) u
      where p.is_default and not exists (select 1 from memberships m where m.organization_id = p.organization_id)`);
  }

  override down(): void {
    // The memberships given stay: they are ordinary owner memberships.
    this.addSql('drop index memberships_organization_idx');
  }
}
