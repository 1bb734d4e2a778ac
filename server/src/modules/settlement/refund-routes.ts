import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { notFound } from '../../lib/errors.js';

const s = initServer();

/** /v1/refunds: the refund workflow (placeholder until the workflow lands). */
export const refundsRoutes = s.router(contract.refunds, {
  create: async () => {
    throw notFound('refund');
  },
  authorize: async () => {
    throw notFound('refund');
  },
  cancel: async () => {
    throw notFound('refund');
  },
  get: async () => {
    throw notFound('refund');
  },
  list: async () => {
    throw notFound('refund');
  },
});
