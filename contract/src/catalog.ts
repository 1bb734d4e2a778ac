import { z } from 'zod';
import { c, DecimalString, IsoTimestamp, keyErrors, meta, MerchantIdQuery } from './common.js';
import { ErrorBody } from './errors.js';

export const Sku = z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'must match ^[A-Za-z0-9._-]{1,128}$');
export const CurrencyCode = z
  .string()
  .regex(/^[A-Za-z]{3}$/, 'must be a 3-letter ISO 4217 code such as USD')
  .transform((s) => s.toUpperCase());

/** price.amount failures are reported as PRICE_AMOUNT_INVALID by the server's validation handler. */
export const Price = z
  .object({
    amount: DecimalString.describe('Exact decimal string, at most 12 integer digits and 8 decimals; returned byte for byte.'),
    currency: CurrencyCode,
  })
  .strict();

export const CatalogItemInput = z
  .object({
    sku: Sku,
    name: z.string().trim().min(1).max(200),
    price: Price,
    available: z.boolean().optional().describe('Default true.'),
    description: z.string().max(5000).optional(),
    category: z.string().max(200).optional(),
    unit: z.string().max(50).optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type CatalogItemInput = z.infer<typeof CatalogItemInput>;

export const CatalogItemPatch = z
  .object({
    price: Price.optional(),
    available: z.boolean().optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
    name: z.string().trim().min(1).max(200).optional(),
    description: z.string().max(5000).nullable().optional(),
    category: z.string().max(200).nullable().optional(),
    unit: z.string().max(50).nullable().optional(),
  })
  .strict();
export type CatalogItemPatch = z.infer<typeof CatalogItemPatch>;

export const CatalogItem = z.object({
  id: z.string().describe('prod_ id'),
  sku: z.string(),
  name: z.string(),
  price: z.object({ amount: z.string(), currency: z.string() }),
  available: z.boolean(),
  description: z.string().optional(),
  category: z.string().optional(),
  unit: z.string().optional(),
  metadata: z.record(z.string(), z.unknown()).optional(),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
});
export type CatalogItem = z.infer<typeof CatalogItem>;

// A sku that cannot exist (too long) is 404 like one that does not.
const SkuParams = z.object({ sku: z.string().min(1) });

export const catalogContract = c.router({
  list: {
    method: 'GET',
    path: '',
    query: MerchantIdQuery.extend({
      available: z.enum(['true', 'false']).optional().describe('true: only available items; false: only retired (unavailable) items.'),
    }).strict(),
    responses: { 200: z.object({ items: z.array(CatalogItem) }) },
    summary: 'List catalog items, ordered by category then name',
    metadata: meta({ auth: 'key', scopes: ['products:read'], tag: 'Catalog', operationId: 'listCatalogItems' }),
  },
  create: {
    method: 'POST',
    path: '',
    query: MerchantIdQuery,
    body: CatalogItemInput,
    responses: { 201: CatalogItem, 409: ErrorBody },
    summary: 'Add a catalog item',
    metadata: meta({ auth: 'key', scopes: ['products:write'], tag: 'Catalog', operationId: 'createCatalogItem' }),
  },
  update: {
    method: 'PATCH',
    path: '/:sku',
    pathParams: SkuParams,
    query: MerchantIdQuery,
    body: CatalogItemPatch,
    responses: { 200: CatalogItem },
    summary: 'Update a catalog item; only present fields change',
    metadata: meta({ auth: 'key', scopes: ['products:write'], tag: 'Catalog', operationId: 'updateCatalogItem' }),
  },
  remove: {
    method: 'DELETE',
    path: '/:sku',
    pathParams: SkuParams,
    query: MerchantIdQuery,
    body: c.noBody(),
    responses: { 204: c.noBody() },
    summary: 'Retire a catalog item (sets available=false; the row remains for orders and receipts)',
    metadata: meta({ auth: 'key', scopes: ['products:write'], tag: 'Catalog', operationId: 'deleteCatalogItem' }),
  },
}, { pathPrefix: '/v1/catalog', commonResponses: keyErrors });
