import { QueryOrder, UniqueConstraintViolationException } from '@mikro-orm/core';
import { Sku, type CatalogItem, type CatalogItemInput, type CatalogItemPatch } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { bumpConfigVersion, resolveMerchant } from '../merchants/service.js';
import { CatalogItemEntity } from './entity.js';

export type CatalogRow = InstanceType<typeof CatalogItemEntity.class>;

export function presentCatalogItem(i: CatalogRow): CatalogItem {
  return {
    id: i.id,
    sku: i.sku,
    name: i.name,
    price: { amount: i.priceAmount, currency: i.currency },
    available: i.available,
    ...(i.description != null ? { description: i.description } : {}),
    ...(i.category != null ? { category: i.category } : {}),
    ...(i.unit != null ? { unit: i.unit } : {}),
    ...(i.metadata != null ? { metadata: i.metadata } : {}),
    created_at: i.createdAt.toISOString(),
    updated_at: i.updatedAt.toISOString(),
  };
}

const ORDER = [{ category: QueryOrder.ASC_NULLS_LAST }, { name: QueryOrder.ASC }, { sku: QueryOrder.ASC }] as const;

/** Items of one merchant ordered by category then name (uncategorized last). */
/** `available`: true -> only available items, false -> only retired ones, undefined -> all. */
export async function listCatalogItems(em: Em, merchantId: string, available?: boolean): Promise<CatalogRow[]> {
  return em.find(CatalogItemEntity, { merchantId, ...(available === undefined ? {} : { available }) }, { orderBy: [...ORDER] });
}

export async function listCatalog(em: Em, auth: AuthContext, query: { merchant_id?: string; available?: 'true' | 'false' }) {
  const m = await resolveMerchant(em, auth, query.merchant_id);
  const rows = await listCatalogItems(em, m.id, query.available === undefined ? undefined : query.available === 'true');
  return { items: rows.map(presentCatalogItem) };
}

export async function createCatalogItem(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, body: CatalogItemInput) {
  try {
    return await ctx.em.transactional(async (tx) => {
      const m = await resolveMerchant(tx, ctx.auth, merchantId);
      const now = ctx.services.now();
      const item = tx.create(CatalogItemEntity, {
        id: newId('prod'),
        merchantId: m.id,
        sku: body.sku,
        name: body.name,
        priceAmount: body.price.amount,
        currency: body.price.currency,
        available: body.available ?? true,
        description: body.description ?? null,
        category: body.category ?? null,
        unit: body.unit ?? null,
        metadata: body.metadata ?? null,
        createdAt: now,
        updatedAt: now,
      });
      await tx.flush();
      await bumpConfigVersion(ctx, tx, m.id, now);
      await respondIn(ctx, tx, 201, presentCatalogItem(item));
      return item;
    });
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException) throw new ApiError('PRODUCT_SKU_TAKEN', `SKU ${body.sku} already exists for this merchant.`);
    throw err;
  }
}

async function findItem(em: Em, merchantId: string, sku: string) {
  // A path that is not a valid SKU names no item; it never reaches the database (NUL bytes would fail there).
  const item = Sku.safeParse(sku).success ? await em.findOne(CatalogItemEntity, { merchantId, sku }) : null;
  if (!item) throw new ApiError('NOT_FOUND', `No catalog item with SKU ${sku}.`);
  return item;
}

export async function updateCatalogItem(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, sku: string, patch: CatalogItemPatch) {
  return ctx.em.transactional(async (tx) => {
    const m = await resolveMerchant(tx, ctx.auth, merchantId);
    const item = await findItem(tx, m.id, sku);
    if (patch.price) {
      item.priceAmount = patch.price.amount;
      item.currency = patch.price.currency;
    }
    if (patch.available !== undefined) item.available = patch.available;
    if (patch.metadata !== undefined) item.metadata = patch.metadata;
    if (patch.name !== undefined) item.name = patch.name;
    if (patch.description !== undefined) item.description = patch.description;
    if (patch.category !== undefined) item.category = patch.category;
    if (patch.unit !== undefined) item.unit = patch.unit;
    const now = ctx.services.now();
    item.updatedAt = now;
    await tx.flush();
    await bumpConfigVersion(ctx, tx, m.id, now);
    return item;
  });
}

/** Soft delete: the row stays (orders and receipts keep their reference), available becomes false. */
export async function deleteCatalogItem(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, sku: string) {
  await ctx.em.transactional(async (tx) => {
    const m = await resolveMerchant(tx, ctx.auth, merchantId);
    const item = await findItem(tx, m.id, sku);
    item.available = false;
    const now = ctx.services.now();
    item.updatedAt = now;
    await tx.flush();
    await bumpConfigVersion(ctx, tx, m.id, now);
  });
}

/** One item of a merchant by SKU, or null. */
export async function findCatalogItem(em: Em, merchantId: string, sku: string): Promise<CatalogRow | null> {
  return em.findOne(CatalogItemEntity, { merchantId, sku });
}
