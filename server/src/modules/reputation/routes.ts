import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { ctxOf } from '../../http/context.js';
import { lenientCaller } from '../../http/auth.js';
import { agentReputation, merchantReputation } from './service.js';

const s = initServer();

/**
 * Public reputation lookups (never fail: an unknown subject or an outage is the neutral default).
 * A valid key or session makes them answer in that key's mode and project (`lenientCaller`).
 */
export const reputationRoutes = s.router(contract.reputation, {
  agent: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId, lenientCaller(req)) }),
  short: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId, lenientCaller(req)) }),
  legacy: async ({ req, params }) => ({ status: 200, body: await agentReputation(ctxOf(req).services, params.agentId, lenientCaller(req)) }),
  merchant: async ({ req, params }) => ({ status: 200, body: await merchantReputation(ctxOf(req).services, params.merchantId, lenientCaller(req)) }),
});
