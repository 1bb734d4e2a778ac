import { UniqueConstraintViolationException } from '@mikro-orm/core';
import { Sku, type CatalogItem, type CatalogItemInput, type CatalogItemPatch } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import { bumpConfigVersion, resolveMerchant } from '../merchants/index.js';
import { findCatalogItem, insertCatalogItem, listCatalogItems, updateCatalogItemRow, type CatalogRow } from './store.js';

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
      const item = await insertCatalogItem(tx, {
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
  const item = Sku.safeParse(sku).success ? await findCatalogItem(em, merchantId, sku) : null;
  if (!item) throw new ApiError('NOT_FOUND', `No catalog item with SKU ${sku}.`);
  return item;
}

export async function updateCatalogItem(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, sku: string, patch: CatalogItemPatch) {
  return ctx.em.transactional(async (tx) => {
    const m = await resolveMerchant(tx, ctx.auth, merchantId);
    const item = await findItem(tx, m.id, sku);
    const changes: Partial<CatalogRow> = {};
    if (patch.price) {
      changes.priceAmount = patch.price.amount;
      changes.currency = patch.price.currency;
    }
    if (patch.available !== undefined) changes.available = patch.available;
    if (patch.metadata !== undefined) changes.metadata = patch.metadata;
    if (patch.name !== undefined) changes.name = patch.name;
    if (patch.description !== undefined) changes.description = patch.description;
    if (patch.category !== undefined) changes.category = patch.category;
    if (patch.unit !== undefined) changes.unit = patch.unit;
    const now = ctx.services.now();
    changes.updatedAt = now;
    await updateCatalogItemRow(tx, item, changes);
    await bumpConfigVersion(ctx, tx, m.id, now);
    return item;
  });
}

/** Soft delete: the row stays (orders and receipts keep their reference), available becomes false. */
export async function deleteCatalogItem(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, sku: string) {
  await ctx.em.transactional(async (tx) => {
    const m = await resolveMerchant(tx, ctx.auth, merchantId);
    const item = await findItem(tx, m.id, sku);
    const now = ctx.services.now();
    await updateCatalogItemRow(tx, item, { available: false, updatedAt: now });
    await bumpConfigVersion(ctx, tx, m.id, now);
  });
}
