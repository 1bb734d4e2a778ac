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
