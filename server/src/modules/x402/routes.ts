import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import type { Request, Response } from 'express';
import { agentOriginOf, agentPrefixOf, ctxOf, publicBaseUrl } from '../../http/context.js';
import { buyItem, type X402Reply } from './service.js';
import { paymentHeaderOf } from './wire.js';

const s = initServer();

/**
 * The payment header (if any) and the absolute URL of the resource (x402 `resource.url`): the
 * configured origin of the host the agent used (agentOriginOf) with the path and query it
 * asked for. Only the path and query come from the request target (an absolute-form target's
 * own authority is dropped); the Host header never reaches the URL.
 */
export function paymentTransportOf(req: Request) {
  const origin = agentOriginOf(req);
  const target = new URL(req.originalUrl, origin);
  return { header: paymentHeaderOf((name) => req.get(name)), resourceUrl: `${origin}${target.pathname}${target.search}` };
}

/** Sets the reply's x402 headers; a 402 or a paid answer is never cached by anyone. */
export function sendX402(res: Response, reply: X402Reply) {
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (reply.status === 402 || reply.status === 200) res.setHeader('Cache-Control', 'no-store');
  // The contract declares every status and body this can produce (responseValidation checks it in tests).
  return { status: reply.status, body: reply.body } as never;
}

/** The paid resource per catalog item (contract `x402.resource`). */
export const x402Routes = s.router(contract.x402, {
  resource: async ({ req, res, params, query, headers }) =>
    sendX402(
      res,
      await buyItem(ctxOf(req), params.merchant, {
        prefix: agentPrefixOf(req, params.merchant),
        sku: params.sku,
        qty: query.qty ? Number(query.qty) : 1,
        baseUrl: publicBaseUrl(req),
        agentId: headers['x-agent-id'],
        ...paymentTransportOf(req),
      }),
    ),
});
