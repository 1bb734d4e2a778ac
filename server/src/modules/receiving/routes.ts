import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { getReceiving, putReceiving, receivingBalance } from '../merchants/index.js';

const s = initServer();

/** /v1/receiving: where each rail pays the merchant (stored on the merchant row). */
export const receivingRoutes = s.router(contract.receiving, {
  get: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await getReceiving(ctx.em, ctx.auth, query.merchant_id) };
  },
  balance: async ({ req, query }) => ({ status: 200, body: await receivingBalance(authed(req), query.merchant_id) }),
  put: async ({ req, query, body }) => ({ status: 200, body: await putReceiving(authed(req), body.receiving, query.merchant_id) }),
});
