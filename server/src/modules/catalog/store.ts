import { QueryOrder, type RequiredEntityData } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { CatalogItemEntity } from './entity.js';

/**
 * The catalog module's data access: every query on `catalog_items` (an entity, ./entity.ts,
 * through the EntityManager). No rules here: ./service.ts decides.
 */

export type CatalogRow = InstanceType<typeof CatalogItemEntity.class>;

const ORDER = [{ category: QueryOrder.ASC_NULLS_LAST }, { name: QueryOrder.ASC }, { sku: QueryOrder.ASC }] as const;

/** Items of one merchant ordered by category then name (uncategorized last). */
/** `available`: true -> only available items, false -> only retired ones, undefined -> all. */
export async function listCatalogItems(em: Em, merchantId: string, available?: boolean): Promise<CatalogRow[]> {
  return em.find(CatalogItemEntity, { merchantId, ...(available === undefined ? {} : { available }) }, { orderBy: [...ORDER] });
}

/** One item of a merchant by SKU, or null. */
export async function findCatalogItem(em: Em, merchantId: string, sku: string): Promise<CatalogRow | null> {
  return em.findOne(CatalogItemEntity, { merchantId, sku });
}

export async function insertCatalogItem(tx: Em, row: RequiredEntityData<CatalogRow>): Promise<CatalogRow> {
  const item = tx.create(CatalogItemEntity, row);
  await tx.flush();
  return item;
}

/** Writes the changed fields of a loaded item. */
export async function updateCatalogItemRow(tx: Em, item: CatalogRow, changes: Partial<CatalogRow>): Promise<void> {
  Object.assign(item, changes);
  await tx.flush();
}
