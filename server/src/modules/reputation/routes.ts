import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { ctxOf } from '../../http/context.js';
import { agentReputation, merchantReputation } from './service.js';

const s = initServer();

/** Public reputation lookups (never fail: an unknown subject or an outage is the neutral default). */
export const reputationRoutes = s.router(contract.reputation, {
  agent: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId) }),
  short: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId) }),
  legacy: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId) }),
  merchant: async ({ req, params }) => ({ status: 200, body: await merchantReputation(ctxOf(req).services, params.merchantId) }),
});
