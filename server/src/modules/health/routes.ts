import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { ctxOf } from '../../http/context.js';
import { readiness } from './service.js';

const s = initServer();

/** GET /healthz (process up) and GET /readyz (database and live facilitator). */
export const healthRoutes = s.router(contract.health, {
  healthz: async () => ({ status: 200, body: { ok: true } }),
  readyz: async ({ req }) => ({ status: 200, body: await readiness(ctxOf(req).services) }),
});
