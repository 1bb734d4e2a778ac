import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { authed } from '../../http/context.js';
import { ingestDecision, ingestOrder, ingestSession } from './service.js';

const s = initServer();

/** /v1/ingest: sessions, orders and decisions from a merchant's own checkout. */
export const ingestRoutes = s.router(contract.ingest, {
  session: async ({ req, body }) => ({ status: 200, body: await ingestSession(authed(req), body.session) }),
  order: async ({ req, body }) => ({ status: 201, body: await ingestOrder(authed(req), body) }),
  decision: async ({ req, body }) => ({ status: 200, body: await ingestDecision(authed(req), body.session) }),
});
