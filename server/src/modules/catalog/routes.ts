import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { createCatalogItem, deleteCatalogItem, listCatalog, presentCatalogItem, updateCatalogItem } from './service.js';

const s = initServer();

/** /v1/catalog: a merchant's items (the agent-facing catalog is in modules/agent). */
export const catalogRoutes = s.router(contract.catalog, {
  list: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listCatalog(ctx.em, ctx.auth, query) };
  },
  create: async ({ req, query, body }) => {
    const ctx = authed(req);
    return { status: 201, body: presentCatalogItem(await createCatalogItem(ctx, query.merchant_id, body)) };
  },
  update: async ({ req, query, params, body }) => {
    const ctx = authed(req);
    return { status: 200, body: presentCatalogItem(await updateCatalogItem(ctx, query.merchant_id, params.sku, body)) };
  },
  remove: async ({ req, query, params }) => {
    await deleteCatalogItem(authed(req), query.merchant_id, params.sku);
    return { status: 204, body: undefined };
  },
});
