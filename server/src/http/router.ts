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
import { etagMatches, manifestFor, merchantByRef } from '../modules/agent/discovery.js';
import { listCatalogItems } from '../modules/catalog/service.js';
import { createCheckout, findSession, sessionView } from '../modules/checkout/service.js';
import { resolveHold, settleSession } from '../modules/checkout/settle.js';
import { listOrders, sessionForMerchantKey } from '../modules/orders/service.js';
import { lookupReputation } from '../modules/reputation/service.js';
import { ingestDecision, ingestOrder, ingestSession } from '../modules/ingest/service.js';
import { authed, ctxOf, type Ctx } from './context.js';
import { webhooksRouter } from './webhook-routes.js';
import { liveReadiness } from '../rails/index.js';

/** Where hosted links (review_url) point: SVC_PUBLIC_BASE_URL, else the origin the request came to. */
function baseUrlOf(req: { protocol: string; get(name: string): string | undefined }, ctx: Ctx): string {
  return ctx.services.config.SVC_PUBLIC_BASE_URL?.replace(/\/$/, '') ?? `${req.protocol}://${req.get('host')}`;
}

const RESERVED = new Set(['agent', 'merchant']);
async function agentReputation(ctx: Ctx, agentId: string) {
  if (RESERVED.has(agentId.toLowerCase())) {
    throw new ApiError('VALIDATION_FAILED', `"${agentId}" is a reserved segment; use /v1/reputation/agent/<agentId> or /v1/reputation/merchant/<merchantId>.`);
  }
  return { agentId, ...(await lookupReputation(ctx.services.orm.em.fork(), 'agent', agentId)) };
}

const s = initServer();

/** Thin adapters: the contract parsed the input; each calls one service and maps the result. */
export const router = s.router(contract, {
  health: {
    healthz: async () => ({ status: 200, body: { ok: true } }),
    readyz: async ({ req }) => {
      const ctx = ctxOf(req);
      const ok = await pingDatabase(ctx.services.orm, 1500);
      if (!ok) throw new ApiError('DATABASE_UNAVAILABLE');
      const live = await liveReadiness(ctx.services.facilitators.live, 1500);
      return { status: 200, body: { ok: true, db: true, live } };
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
  agent: {
    manifest: async ({ req, res, params }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      const manifest = await manifestFor(ctx.em, m, req.agentPrefix ?? `/m/${params.merchant}`);
      res.setHeader('ETag', manifest.etag);
      res.setHeader('Cache-Control', 'public, max-age=30, must-revalidate');
      if (etagMatches(req.header('if-none-match'), manifest.etag)) return { status: 304, body: undefined };
      return { status: 200, body: manifest.body };
    },
    jwks: async ({ req, res, params }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      res.setHeader('Cache-Control', 'public, max-age=300');
      return { status: 200, body: await merchantJwks(ctx.em, m.id) };
    },
    catalog: async ({ req, params }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      return { status: 200, body: { items: (await listCatalogItems(ctx.em, m.id, true)).map(presentCatalogItem) } };
    },
    createCheckout: async ({ req, params, body }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      return { status: 201, body: await createCheckout(ctx, m, req.agentPrefix ?? `/m/${params.merchant}`, body) };
    },
    getCheckout: async ({ req, params }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      return { status: 200, body: sessionView(await findSession(ctx.em, m, params.id), ctx.services.now()) };
    },
    settle: async ({ req, params, body }) => {
      const ctx = ctxOf(req);
      const m = await merchantByRef(ctx.em, params.merchant);
      return settleSession(ctx, m, params.id, body, baseUrlOf(req, ctx));
    },
  },
  orders: {
    list: async ({ req, query }) => {
      const ctx = authed(req);
      return { status: 200, body: await listOrders(ctx.em, ctx.auth, query) };
    },
  },
  sessions: {
    get: async ({ req, params }) => {
      const ctx = authed(req);
      const { session } = await sessionForMerchantKey(ctx.em, ctx.auth, params.id);
      return { status: 200, body: sessionView(session, ctx.services.now()) };
    },
    approve: async ({ req, params }) => {
      const ctx = authed(req);
      const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, params.id);
      const out = await resolveHold(ctx, merchant, params.id, 'approve');
      if (out.kind === 'approved') return { status: 200, body: out.body };
      if (out.kind === 'approval_pending') return { status: 202, body: out.body };
      throw new ApiError('SESSION_NOT_HELD');
    },
    decline: async ({ req, params }) => {
      const ctx = authed(req);
      const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, params.id);
      const out = await resolveHold(ctx, merchant, params.id, 'decline');
      if (out.kind !== 'declined') throw new ApiError('SESSION_NOT_HELD');
      return { status: 200, body: out.body };
    },
  },
  ingest: {
    session: async ({ req, body }) => ({ status: 200, body: await ingestSession(authed(req), body.session) }),
    order: async ({ req, body }) => ({ status: 201, body: await ingestOrder(authed(req), body) }),
    decision: async ({ req, body }) => ({ status: 200, body: await ingestDecision(authed(req), body.session) }),
  },
  reputation: {
    agent: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req), params.agentId) }),
    short: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req), params.agentId) }),
    legacy: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req), params.agentId) }),
    merchant: async ({ req, params }) => {
      const ctx = ctxOf(req);
      return { status: 200, body: { merchantId: params.merchantId, ...(await lookupReputation(ctx.services.orm.em.fork(), 'merchant', params.merchantId)) } };
    },
  },
  webhooks: webhooksRouter,
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
