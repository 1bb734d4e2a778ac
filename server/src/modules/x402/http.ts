import type { Request, Response } from 'express';
import { agentOriginOf } from '../../http/context.js';
import type { Reply } from './service.js';
import { paymentHeaderOf } from './wire.js';

/**
 * The x402 transport's HTTP edge, for the routes that take x402 payments (modules/agent/routes.ts:
 * the settle route and the paid resource): the payment header in, the x402 headers out.
 */

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

/** Sets the reply's x402 headers (a 402 or a paid answer is never cached by anyone) and hands back its contract response. */
export function sendX402<R extends { status: number }>(res: Response, reply: Reply<R>): R {
  for (const [name, value] of Object.entries(reply.headers)) res.setHeader(name, value);
  if (reply.response.status === 402 || reply.response.status === 200) res.setHeader('Cache-Control', 'no-store');
  return reply.response;
}
