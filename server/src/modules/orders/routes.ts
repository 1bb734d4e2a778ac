import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { listOrders, ordersSummary } from './service.js';

const s = initServer();

/** GET /v1/orders: the merchant's order feed; GET /v1/orders/summary: its figures at a glance. */
export const ordersRoutes = s.router(contract.orders, {
  summary: async ({ req, query }) => ({ status: 200, body: await ordersSummary(authed(req), query) }),
  list: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listOrders(ctx.em, ctx.auth, query) };
  },
});
