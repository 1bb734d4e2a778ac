import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { agentPrefixOf, ctxOf, publicBaseUrl } from '../../http/context.js';
import { etagMatches } from './discovery.js';
import { paymentTransportOf, sendX402 } from '../x402/routes.js';
import { agentCatalog, agentJwks, agentManifest, openCheckout, pollCheckout, settleCheckout } from './service.js';

const s = initServer();

/** The agent protocol under /m/<merchant>/ (and the discovery and merchant hosts, rewritten to it). */
export const agentRoutes = s.router(contract.agent, {
  manifest: async ({ req, res, params }) => {
    const manifest = await agentManifest(ctxOf(req), params.merchant, agentPrefixOf(req, params.merchant));
    res.setHeader('ETag', manifest.etag);
    res.setHeader('Cache-Control', 'public, max-age=30, must-revalidate');
    if (etagMatches(req.header('if-none-match'), manifest.etag)) return { status: 304, body: undefined };
    return { status: 200, body: manifest.body };
  },
  jwks: async ({ req, res, params }) => {
    const body = await agentJwks(ctxOf(req), params.merchant);
    res.setHeader('Cache-Control', 'public, max-age=300');
    return { status: 200, body };
  },
  catalog: async ({ req, params }) => ({ status: 200, body: await agentCatalog(ctxOf(req), params.merchant) }),
  createCheckout: async ({ req, params, body }) => ({
    status: 201,
    body: await openCheckout(ctxOf(req), params.merchant, agentPrefixOf(req, params.merchant), body),
  }),
  getCheckout: async ({ req, params }) => ({ status: 200, body: await pollCheckout(ctxOf(req), params.merchant, params.id) }),
  // JSON body or x402 headers (PAYMENT-SIGNATURE / X-PAYMENT): one settle path, answered in the payer's transport.
  settle: async ({ req, res, params, body }) =>
    sendX402(res, await settleCheckout(ctxOf(req), params.merchant, params.id, body, { ...paymentTransportOf(req), baseUrl: publicBaseUrl(req) })),
});
