import { Migration } from '@mikro-orm/migrations';

/**
 * A slug and a verified storefront domain each belong to one project (issue 24, item 3).
 *
 * - `merchant_slugs` claims a slug for a project; every merchant references its claim
 *   (`(slug, project_id)`), so a test and a live merchant of one project may share a slug and
 *   no other project can take it in either mode. Before this, uniqueness was (slug, livemode):
 *   another project could take a slug in the other mode and, once published live, capture
 *   `/m/<slug>` and `<slug>.<discovery domain>`.
 * - Existing conflicts: the project of the slug's first-created merchant (created_at, then id)
 *   keeps it; every merchant of another project with that slug is renamed
 *   `<the slug's first 36 characters>-<its id without mrch_>` (a valid, unique slug of at most
 *   63 characters); `/m/<mrch_ id>` keeps naming it.
 * - `merchants.domain_token` is what the owner publishes to prove control of its domain;
 *   `verified_domain` (with `domain_verified_at`) is set only once that proof was seen, must
 *   equal `domain` (so changing the domain clears it), and references `merchant_domains`,
 *   which gives a verified domain to one project. Existing merchants start unverified: their
 *   own domain is not served until the owner verifies it.
 * - A claim is released (trigger) when no merchant of its project uses it any more: a merchant
 *   deleted, or its domain changed or unverified.
 */
export class Migration20261126000020MerchantClaims extends Migration {
  override name = 'Migration20261126000020MerchantClaims';

  override up(): void {
    this.addSql(`create table merchant_slugs (
      slug text primary key,
      project_id text not null references projects(id),
      created_at timestamptz not null,
      constraint merchant_slugs_slug_project unique (slug, project_id)
    )`);
    this.addSql(`with ranked as (
      select id, project_id, first_value(project_id) over (partition by slug order by created_at, id) as owner from merchants
    )
    update merchants m set slug = left(m.slug, 36) || '-' || substr(m.id, 6)
      from ranked r where r.id = m.id and r.project_id <> r.owner`);
    this.addSql(`insert into merchant_slugs (slug, project_id, created_at)
      select slug, project_id, min(created_at) from merchants group by slug, project_id`);
    this.addSql(`alter table merchants add constraint merchants_slug_claim foreign key (slug, project_id) references merchant_slugs (slug, project_id)`);

    this.addSql(`create table merchant_domains (
      domain text primary key,
      project_id text not null references projects(id),
      created_at timestamptz not null,
      constraint merchant_domains_domain_project unique (domain, project_id)
    )`);
    this.addSql(`alter table merchants
      add column domain_token text,
      add column verified_domain text,
      add column domain_verified_at timestamptz`);
    this.addSql(`update merchants set domain_token = replace(gen_random_uuid()::text, '-', '')`);
    this.addSql(`alter table merchants alter column domain_token set not null`);
    this.addSql(`alter table merchants
      add constraint merchants_verified_domain_is_domain check (verified_domain is null or verified_domain = domain),
      add constraint merchants_verified_domain_at check ((verified_domain is null) = (domain_verified_at is null)),
      add constraint merchants_domain_claim foreign key (verified_domain, project_id) references merchant_domains (domain, project_id)`);
    this.addSql(`create index merchants_verified_domain on merchants (verified_domain) where verified_domain is not null`);

    this.addSql(`create function svc_release_merchant_claims() returns trigger language plpgsql as $$
begin
  delete from merchant_slugs s where s.slug = old.slug and s.project_id = old.project_id
    and not exists (select 1 from merchants m where m.slug = old.slug and m.project_id = old.project_id);
  if old.verified_domain is not null then
    delete from merchant_domains d where d.domain = old.verified_domain and d.project_id = old.project_id
      and not exists (select 1 from merchants m where m.verified_domain = old.verified_domain and m.project_id = old.project_id);
  end if;
  return null;
end $$`);
    this.addSql(
      `create trigger merchants_release_claims after delete or update of slug, project_id, verified_domain on merchants for each row execute function svc_release_merchant_claims()`,
    );
  }

  override down(): void {
    this.addSql('drop trigger merchants_release_claims on merchants');
    this.addSql('drop function svc_release_merchant_claims()');
    this.addSql('drop index merchants_verified_domain');
    this.addSql(`alter table merchants
      drop constraint merchants_domain_claim,
      drop constraint merchants_verified_domain_at,
      drop constraint merchants_verified_domain_is_domain,
      drop column domain_verified_at,
      drop column verified_domain,
      drop column domain_token`);
    this.addSql('drop table merchant_domains');
    this.addSql('alter table merchants drop constraint merchants_slug_claim');
    this.addSql('drop table merchant_slugs');
  }
}
