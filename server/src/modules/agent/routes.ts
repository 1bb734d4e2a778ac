import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { agentPrefixOf, ctxOf, publicBaseUrl } from '../../http/context.js';
import { buyItems, paymentTransportOf, sendX402, settleAnyTransport } from '../x402/index.js';
import { etagMatches, merchantByRef } from './discovery.js';
import { agentCatalog, agentJwks, agentManifest, openCheckout, pollCheckout, settleMerchant } from './service.js';

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
  // JSON body or x402 headers (PAYMENT-SIGNATURE / X-PAYMENT): one payment for the settlement
  // workflow (settlement/settle.ts settleSession), answered in the payer's transport (modules/x402).
  settle: async ({ req, res, params, body }) => {
    const ctx = ctxOf(req);
    const transport = { ...paymentTransportOf(req), baseUrl: publicBaseUrl(req) };
    return sendX402(res, await settleAnyTransport(ctx, settleMerchant(ctx, params.merchant), params.id, body, transport));
  },
});

/** The paid resource per catalog item (contract `x402.resource`), under the same /m/<merchant>/ prefix: modules/x402 buyItems. */
export const x402Routes = s.router(contract.x402, {
  resource: async ({ req, res, params, query, headers }) => {
    const ctx = ctxOf(req);
    const purchase = {
      prefix: agentPrefixOf(req, params.merchant),
      items: [{ sku: params.sku, qty: query.qty ? Number(query.qty) : 1 }],
      baseUrl: publicBaseUrl(req),
      agentId: headers['x-agent-id'],
      ...paymentTransportOf(req),
    };
    return sendX402(res, await buyItems(ctx, await merchantByRef(ctx.em, params.merchant), purchase));
  },
});
