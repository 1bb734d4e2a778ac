import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { approveHeldSession, declineHeldSession, getMerchantSession, listOrders, ordersSummary } from './service.js';

const s = initServer();

/** GET /v1/orders: the merchant's order feed; GET /v1/orders/summary: its figures at a glance. */
export const ordersRoutes = s.router(contract.orders, {
  summary: async ({ req, query }) => ({ status: 200, body: await ordersSummary(authed(req), query) }),
  list: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listOrders(ctx.em, ctx.auth, query) };
  },
});

/** /v1/sessions/<id>: the merchant's view of a checkout session and the hold review. */
export const sessionsRoutes = s.router(contract.sessions, {
  get: async ({ req, params }) => ({ status: 200, body: await getMerchantSession(authed(req), params.id) }),
  approve: async ({ req, params }) => approveHeldSession(authed(req), params.id),
  decline: async ({ req, params }) => ({ status: 200, body: await declineHeldSession(authed(req), params.id) }),
});
