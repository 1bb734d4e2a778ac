import type { Em } from '../../db/orm.js';
import { runSql } from '../../db/sql.js';

/**
 * `merchants` is an entity (./entity.ts) reached with the EntityManager; the statements
 * below are atomic updates other modules make in their own transactions, without loading
 * (and re-flushing) the merchant.
 */

/** A merchant's row by id, for the agent routes' every request (prepared; the caller maps it to the entity). */
export async function merchantRowById(em: Em, merchantId: string): Promise<Record<string, unknown> | undefined> {
  const [row] = await runSql(em, 'select * from merchants where id = $1', [merchantId]);
  return row;
}

/** Locks the merchant row FOR UPDATE until the transaction ends (versioning and publishing serialize per merchant). */
export async function lockMerchantForUpdate(tx: Em, merchantId: string): Promise<void> {
  await tx.execute('select id from merchants where id = ? for update', [merchantId]);
}

/** Manifest cache invalidation: one atomic increment, whatever the caller has loaded. */
export async function incrementConfigVersion(em: Em, merchantId: string, now: Date): Promise<void> {
  await em.execute('update merchants set config_version = config_version + 1, updated_at = ? where id = ?', [now, merchantId]);
}

/** The first publish sets published_at; later ones keep it. */
export async function markMerchantPublished(tx: Em, merchantId: string, now: Date): Promise<void> {
  await tx.execute('update merchants set published_at = coalesce(published_at, ?) where id = ?', [now, merchantId]);
}

/**
 * Claims `slug` for the project (merchant_slugs; every merchant references its claim), or
 * finds it already the project's. Answers false when another project holds it. Atomic and
 * race-safe: a concurrent claim of another project waits on the primary key and then sees
 * this one; the no-op `do update` also locks an existing claim until the transaction ends, so
 * the release trigger cannot drop it under the merchant about to reference it.
 */
export async function claimSlug(tx: Em, slug: string, projectId: string, now: Date): Promise<boolean> {
  const rows = await runSql(
    tx,
    `insert into merchant_slugs (slug, project_id, created_at) values ($1, $2, $3)
     on conflict (slug) do update set slug = excluded.slug where merchant_slugs.project_id = excluded.project_id
     returning project_id`,
    [slug, projectId, now],
  );
  return rows.length === 1;
}

/** The same claim for a verified domain (merchant_domains): false when another project verified it first. */
export async function claimDomain(tx: Em, domain: string, projectId: string, now: Date): Promise<boolean> {
  const rows = await runSql(
    tx,
    `insert into merchant_domains (domain, project_id, created_at) values ($1, $2, $3)
     on conflict (domain) do update set domain = excluded.domain where merchant_domains.project_id = excluded.project_id
     returning project_id`,
    [domain, projectId, now],
  );
  return rows.length === 1;
}
