import type { RequiredEntityData } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { PolicyVersionEntity } from './entity.js';

/**
 * The policy module's data access: every query on `policy_versions`. An entity
 * (./entity.ts) through the EntityManager; the SQL statements below are the aggregate and
 * the two-step switch of the one active version (deactivate first, for the partial unique
 * index `policy_versions_one_active`), which an entity flush would not order. No rules
 * here: ./service.ts decides.
 */

export type PolicyVersionRow = InstanceType<typeof PolicyVersionEntity.class>;

/** The merchant's active version, or null. */
export async function findActivePolicyVersion(em: Em, merchantId: string): Promise<PolicyVersionRow | null> {
  return em.findOne(PolicyVersionEntity, { merchantId, active: true });
}

/** The merchant's highest version (the draft a publish activates), or null. */
export async function findNewestPolicyVersion(em: Em, merchantId: string): Promise<PolicyVersionRow | null> {
  return em.findOne(PolicyVersionEntity, { merchantId }, { orderBy: { version: 'desc' } });
}

export async function insertPolicyVersion(tx: Em, row: RequiredEntityData<PolicyVersionRow>): Promise<PolicyVersionRow> {
  const p = tx.create(PolicyVersionEntity, row);
  await tx.flush();
  return p;
}

/** One version of the merchant by id, or null (a cursor of the versions list). */
export async function findPolicyVersion(em: Em, merchantId: string, id: string): Promise<PolicyVersionRow | null> {
  return em.findOne(PolicyVersionEntity, { id, merchantId });
}

/** The merchant's versions, highest first; `belowVersion` continues a page. */
export async function listPolicyVersionRows(em: Em, merchantId: string, q: { limit: number; belowVersion?: number | undefined }): Promise<PolicyVersionRow[]> {
  const where: Record<string, unknown> = { merchantId };
  if (q.belowVersion !== undefined) where.version = { $lt: q.belowVersion };
  return em.find(PolicyVersionEntity, where, { orderBy: { version: 'desc' }, limit: q.limit });
}

/** The next version number of the merchant's policy (call with the merchant row locked). */
export async function nextPolicyVersion(tx: Em, merchantId: string): Promise<number> {
  const rows = await tx.execute<Array<{ v: number | null }>>('select max(version) as v from policy_versions where merchant_id = ?', [merchantId]);
  return Number(rows[0]?.v ?? 0) + 1;
}

/** Makes `policyVersionId` the merchant's only active version. */
export async function activatePolicyVersion(tx: Em, merchantId: string, policyVersionId: string, now: Date): Promise<void> {
  await tx.execute('update policy_versions set active = false where merchant_id = ? and active', [merchantId]);
  await tx.execute('update policy_versions set active = true, activated_at = ? where id = ?', [now, policyVersionId]);
}
