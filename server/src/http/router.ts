import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { describeKey } from '../modules/accounts/service.js';
import { createCatalogItem, deleteCatalogItem, listCatalog, presentCatalogItem, updateCatalogItem } from '../modules/catalog/service.js';
import {
  createMerchant,
  findMerchant,
  getReceiving,
  listMerchants,
  merchantJwks,
  presentMerchant,
  putReceiving,
  updateMerchant,
} from '../modules/merchants/service.js';
import { getPolicy, publishConfig, putPolicy, validateConfig } from '../modules/policy/service.js';
import { ApiError } from '../lib/errors.js';
import { authed, ctxOf } from './context.js';

const s = initServer();

/** Thin adapters: the contract parsed the input; each calls one service and maps the result. */
export const router = s.router(contract, {
  health: {
    healthz: async () => ({ status: 200, body: { ok: true } }),
    readyz: async ({ req }) => {
      const ctx = ctxOf(req);
      const ok = await pingDatabase(ctx.services.orm, 1500);
      if (!ok) throw new ApiError('DATABASE_UNAVAILABLE');
      return { status: 200, body: { ok: true, db: true } };
    },
  },
  me: {
    get: async ({ req }) => {
      const ctx = authed(req);
      return { status: 200, body: await describeKey(ctx.em, ctx.auth) };
    },
  },
  merchants: {
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
    jwks: async ({ req, res, params }) => {
      const ctx = ctxOf(req);
      const body = await merchantJwks(ctx.em, params.id);
      res.setHeader('Cache-Control', 'public, max-age=300');
      return { status: 200, body };
    },
  },
  catalog: {
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
      const ctx = authed(req);
      await deleteCatalogItem(ctx, query.merchant_id, params.sku);
      return { status: 204, body: undefined };
    },
  },
  receiving: {
    get: async ({ req, query }) => {
      const ctx = authed(req);
      return { status: 200, body: await getReceiving(ctx.em, ctx.auth, query.merchant_id) };
    },
    put: async ({ req, query, body }) => {
      const ctx = authed(req);
      return { status: 200, body: await putReceiving(ctx, body.receiving, query.merchant_id) };
    },
  },
  policy: {
    get: async ({ req, query }) => {
      const ctx = authed(req);
      return { status: 200, body: await getPolicy(ctx.em, ctx.auth, query.merchant_id) };
    },
    put: async ({ req, query, body }) => {
      const ctx = authed(req);
      return { status: 201, body: await putPolicy(ctx, query.merchant_id, body.body, body.note) };
    },
    validate: async ({ req, query }) => {
      const ctx = authed(req);
      return { status: 200, body: await validateConfig(ctx.em, ctx.auth, query.merchant_id) };
    },
    publish: async ({ req, query }) => {
      const ctx = authed(req);
      return { status: 200, body: await publishConfig(ctx, query.merchant_id) };
    },
  },
});

/** Readiness ping with its own timeout so a hung database cannot hang the probe. */
export async function pingDatabase(orm: import('../db/orm.js').Orm, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const ping = orm.em
      .fork()
      .execute('select 1 as ok')
      .then(() => true as const)
      .catch(() => false as const);
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
