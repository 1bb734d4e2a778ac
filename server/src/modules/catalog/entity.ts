import { defineEntity, p } from '@mikro-orm/core';

export const CatalogItemEntity = defineEntity({
  name: 'CatalogItem',
  tableName: 'catalog_items',
  properties: {
    id: p.string().primary(),
    merchantId: p.string(),
    sku: p.string(),
    name: p.string(),
    /** The amount exactly as the merchant sent it, returned byte for byte. */
    priceAmount: p.string(),
    currency: p.string(),
    available: p.boolean().default(true),
    description: p.string().nullable(),
    category: p.string().nullable(),
    unit: p.string().nullable(),
    metadata: p.json<Record<string, unknown>>().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    updatedAt: p.datetime().columnType('timestamptz'),
  },
});
