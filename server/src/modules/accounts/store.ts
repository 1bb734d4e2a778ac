import type { Em } from '../../db/orm.js';

/**
 * The accounts tables are entities (./entity.ts) reached with the EntityManager; the
 * statements below are the two an entity cannot say in one round trip.
 */

/**
 * Locks the project row FOR NO KEY UPDATE until the transaction ends: writers of one
 * project take turns (a count then insert cannot go stale) while inserts that reference
 * the project are not blocked.
 */
export async function lockProjectForInserts(tx: Em, projectId: string): Promise<void> {
  await tx.execute('select id from projects where id = ? for no key update', [projectId]);
}

/** Stamps a key as used, without loading it into the unit of work (runs on authenticated requests). */
export async function touchApiKey(em: Em, keyId: string, now: Date): Promise<void> {
  await em.execute('update api_keys set last_used_at = ? where id = ?', [now, keyId]);
}
