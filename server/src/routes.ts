import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { keysRoutes } from './modules/accounts/routes.js';
import { agentRoutes, x402Routes } from './modules/agent/routes.js';
import { catalogRoutes } from './modules/catalog/routes.js';
import { healthRoutes } from './modules/health/routes.js';
import { ingestRoutes } from './modules/ingest/routes.js';
import { merchantsRoutes } from './modules/merchants/routes.js';
import { ordersRoutes } from './modules/orders/routes.js';
import { refundsRoutes, sessionsRoutes } from './modules/settlement/routes.js';
import { policyRoutes } from './modules/policy/routes.js';
import { receivingRoutes } from './modules/receiving/routes.js';
import { reputationRoutes } from './modules/reputation/routes.js';
import { webhooksRoutes } from './modules/webhooks/routes.js';
import { authRoutes, meRoutes } from './modules/auth/routes.js';
import { operatorRoutes } from './modules/operator/routes.js';

/**
 * The whole contract, one resource router per module (`modules/<feature>/routes.ts`). Express
 * tries routes in this order: the agent routes (`/m/:merchant/...`, the bulk of the traffic,
 * sharing no path with the others) come first so their requests skip the other routes' matching.
 */
export const router = initServer().router(contract, {
  agent: agentRoutes,
  health: healthRoutes,
  me: meRoutes,
  merchants: merchantsRoutes,
  catalog: catalogRoutes,
  receiving: receivingRoutes,
  policy: policyRoutes,
  orders: ordersRoutes,
  sessions: sessionsRoutes,
  refunds: refundsRoutes,
  reputation: reputationRoutes,
  ingest: ingestRoutes,
  webhooks: webhooksRoutes,
  keys: keysRoutes,
  auth: authRoutes,
  operator: operatorRoutes,
  x402: x402Routes,
});
