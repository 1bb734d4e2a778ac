import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { authorizeRefund, cancelRefund, createRefund, getRefund, listRefunds } from './refunds.js';

const s = initServer();

/** /v1/refunds: settlement's refund workflow (refunds.ts; docs/settlement.md "Refunds"). */
export const refundsRoutes = s.router(contract.refunds, {
  create: async ({ req, body }) => ({ status: 201, body: await createRefund(authed(req), body) }),
  // 200 once the outcome is known, 202 while the transfer is not confirmed.
  authorize: async ({ req, params, body }) => {
    const out = await authorizeRefund(authed(req), params.id, body.signature);
    return out.status === 202 ? { status: 202, body: out.body } : { status: 200, body: out.body };
  },
  cancel: async ({ req, params }) => ({ status: 200, body: await cancelRefund(authed(req), params.id) }),
  get: async ({ req, params }) => ({ status: 200, body: await getRefund(authed(req), params.id) }),
  list: async ({ req, query }) => ({ status: 200, body: await listRefunds(authed(req), query) }),
});
