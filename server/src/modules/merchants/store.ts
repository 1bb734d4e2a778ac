import { LockMode, type RequiredEntityData } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { entityById, runSql } from '../../db/sql.js';
import { MerchantEntity } from './entity.js';

/**
 * The merchants module's data access: every query on `merchants`, `merchant_slugs` and
 * `merchant_domains`. The merchant is an entity (./entity.ts) reached with the
 * EntityManager; the SQL statements below are the prepared read of the agent routes, the
 * claims (atomic upserts) and the atomic updates other modules make in their own
 * transactions without loading (and re-flushing) the merchant. No rules here: ./service.ts decides.
 */

/** A merchant row as loaded (a managed entity inside its EntityManager). */
export type MerchantRow = InstanceType<typeof MerchantEntity.class>;

/** The fields a new merchant is written with (`configVersion` and `publishedAt` take their defaults). */
export type NewMerchant = RequiredEntityData<MerchantRow>;

export async function insertMerchant(tx: Em, row: NewMerchant): Promise<MerchantRow> {
  const m = tx.create(MerchantEntity, row);
  await tx.flush();
  return m;
}

/** Merchants of the project and mode that are its default (0 or 1: the partial unique index merchants_one_default). */
export async function countDefaultMerchants(tx: Em, projectId: string, livemode: boolean): Promise<number> {
  return tx.count(MerchantEntity, { projectId, livemode, isDefault: true });
}

/** A merchant by id, or null (any project). */
export async function findMerchantById(em: Em, id: string): Promise<MerchantRow | null> {
  return em.findOne(MerchantEntity, { id });
}

/** A merchant by id that must exist (a row another row references). */
export async function findMerchantByIdOrFail(em: Em, id: string): Promise<MerchantRow> {
  return em.findOneOrFail(MerchantEntity, { id });
}

/** A merchant by id: the one already in the unit of work, else the prepared read (merchantRowById) mapped to the entity. */
export async function loadMerchantById(em: Em, id: string): Promise<MerchantRow | null> {
  return entityById(em, MerchantEntity, id, merchantRowById);
}

/** A merchant of the project and mode, or null. */
export async function findProjectMerchant(em: Em, where: { id: string; projectId: string; livemode: boolean }): Promise<MerchantRow | null> {
  return em.findOne(MerchantEntity, { id: where.id, projectId: where.projectId, livemode: where.livemode });
}

/** The project's default merchant of the mode, or null. */
export async function findDefaultMerchant(em: Em, projectId: string, livemode: boolean): Promise<MerchantRow | null> {
  return em.findOne(MerchantEntity, { projectId, livemode, isDefault: true });
}

/** The project's merchants of the mode, highest id first, below `beforeId` when given. */
export async function listProjectMerchants(em: Em, q: { projectId: string; livemode: boolean; beforeId?: string; limit: number }): Promise<MerchantRow[]> {
  const where: Record<string, unknown> = { projectId: q.projectId, livemode: q.livemode };
  if (q.beforeId) where.id = { $lt: q.beforeId };
  return em.find(MerchantEntity, where, { orderBy: { id: 'desc' }, limit: q.limit });
}

/** The merchant re-read with its row locked FOR UPDATE (inside a transaction). */
export async function lockMerchantRowById(tx: Em, id: string): Promise<MerchantRow> {
  return tx.findOneOrFail(MerchantEntity, { id }, { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true });
}

/** Writes the changed fields of a loaded merchant. */
export async function updateMerchantRow(tx: Em, m: MerchantRow, changes: Partial<MerchantRow>): Promise<void> {
  Object.assign(m, changes);
  await tx.flush();
}

/** The published merchant with this slug, live first, or null (an unpublished live merchant does not hide the published test one). */
export async function findPublishedMerchantBySlug(em: Em, slug: string): Promise<MerchantRow | null> {
  const rows = await em.find(MerchantEntity, { slug, publishedAt: { $ne: null } }, { orderBy: { livemode: 'desc' }, limit: 1 });
  return rows[0] ?? null;
}

/** The id of the published merchant whose verified domain is `domain`, live first then oldest, or null. */
export async function findPublishedMerchantIdByDomain(em: Em, domain: string): Promise<string | null> {
  const rows = await em.find(MerchantEntity, { verifiedDomain: domain, publishedAt: { $ne: null } }, { orderBy: { livemode: 'desc', createdAt: 'asc' }, limit: 1 });
  return rows[0]?.id ?? null;
}

/** The merchant's columns the settle path uses (settlement/settle.ts), read by the settle's lock statement. */
export type SettleMerchant = Pick<
  MerchantRow,
  'id' | 'projectId' | 'livemode' | 'slug' | 'verifiedDomain' | 'receiptKid' | 'receiptPublicX' | 'receiptSeedSealed' | 'trustedSvcJwksUrl' | 'trustedAp2Issuers' | 'configVersion' | 'publishedAt'
>;

/**
 * Those columns of the merchant aliased `m`, prefixed `m_`, for a statement of another module
 * that joins the merchant of its row (checkout/store.ts `lockSettleRow`); `settleMerchantOf` reads them back.
 */
export const SETTLE_MERCHANT_COLUMNS = `m.id as m_id, m.project_id as m_project_id, m.livemode as m_livemode, m.slug as m_slug,
  m.verified_domain as m_verified_domain, m.receipt_kid as m_receipt_kid, m.receipt_public_x as m_receipt_public_x,
  m.receipt_seed_sealed as m_receipt_seed_sealed, m.trusted_svc_jwks_url as m_trusted_svc_jwks_url,
  m.trusted_ap2_issuers as m_trusted_ap2_issuers,
  m.config_version as m_config_version, m.published_at as m_published_at`;

/** The merchant of a row read with SETTLE_MERCHANT_COLUMNS: a plain object, no entity. */
export function settleMerchantOf(r: Record<string, unknown>): SettleMerchant {
  const publishedAt = r.m_published_at;
  return {
    id: r.m_id as string,
    projectId: r.m_project_id as string,
    livemode: r.m_livemode as boolean,
    slug: r.m_slug as string,
    verifiedDomain: (r.m_verified_domain as string | null) ?? null,
    receiptKid: r.m_receipt_kid as string,
    receiptPublicX: r.m_receipt_public_x as string,
    receiptSeedSealed: r.m_receipt_seed_sealed as string,
    trustedSvcJwksUrl: (r.m_trusted_svc_jwks_url as string | null) ?? null,
    trustedAp2Issuers: Array.isArray(r.m_trusted_ap2_issuers) ? (r.m_trusted_ap2_issuers as string[]) : (JSON.parse(String(r.m_trusted_ap2_issuers ?? '[]')) as string[]),
    configVersion: Number(r.m_config_version),
    publishedAt: publishedAt === null || publishedAt === undefined ? null : publishedAt instanceof Date ? publishedAt : new Date(publishedAt as string),
  };
}

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
