import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed, ctxOf } from '../../http/context.js';
import { createMerchant, findMerchant, listMerchants, merchantJwks, presentMerchant, updateMerchant, verifyMerchantDomain } from './service.js';

const s = initServer();

/** /v1/merchants: create, list, read, update, verify the domain, and the public receipt JWKS. */
export const merchantsRoutes = s.router(contract.merchants, {
  create: async ({ req, body }) => {
    const ctx = authed(req);
    return { status: 201, body: presentMerchant(await createMerchant(ctx, body)) };
  },
  list: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listMerchants(ctx.em, ctx.auth, query.limit, query.cursor) };
  },
  get: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: presentMerchant(await findMerchant(ctx.em, ctx.auth, params.id)) };
  },
  update: async ({ req, params, body }) => {
    const ctx = authed(req);
    return { status: 200, body: presentMerchant(await updateMerchant(ctx, params.id, body)) };
  },
  verifyDomain: async ({ req, params }) => {
    const ctx = authed(req);
    return { status: 200, body: presentMerchant(await verifyMerchantDomain(ctx, params.id)) };
  },
  jwks: async ({ req, res, params }) => {
    const body = await merchantJwks(ctxOf(req).em, params.id);
    res.setHeader('Cache-Control', 'public, max-age=300');
    return { status: 200, body };
  },
});
