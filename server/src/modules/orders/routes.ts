import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { exportOrdersCsv, listOrders, ordersSummary } from './service.js';

const s = initServer();

/** GET /v1/orders: the merchant's order feed; GET /v1/orders/summary: its figures at a glance. */
export const ordersRoutes = s.router(contract.orders, {
  summary: async ({ req, query }) => ({ status: 200, body: await ordersSummary(authed(req), query) }),
  export: async ({ req, res, query }) => {
    const ctx = authed(req);
    const body = await exportOrdersCsv(ctx.em, ctx.auth, query);
    res.setHeader('content-type', 'text/csv; charset=utf-8');
    res.setHeader('content-disposition', `attachment; filename="orders-${ctx.auth.livemode ? 'live' : 'test'}.csv"`);
    // ts-rest pipes a stream body as it is (the contract's string is the document it streams)
    return { status: 200, body: body as unknown as string };
  },
  list: async ({ req, query }) => {
    const ctx = authed(req);
    return { status: 200, body: await listOrders(ctx.em, ctx.auth, query) };
  },
});
