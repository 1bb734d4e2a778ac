import type { CreateCheckoutBody, SettleBody } from '@svc/contract';
import { settleAnyTransport, type X402Transport } from '../x402/service.js';
import type { Ctx } from '../../http/context.js';
import { createCheckout, findSession, sessionView } from '../checkout/service.js';
import { listCatalogItems, presentCatalogItem } from '../catalog/service.js';
import { merchantJwks } from '../merchants/service.js';
import { manifestFor, merchantByRef } from './discovery.js';

/**
 * The agent-facing calls, each by merchant reference (`mrch_` id or slug; see merchantByRef)
 * and, where links are returned, the path prefix the agent used (`/m/<ref>`, or empty on
 * the discovery host and the merchant's own domain).
 */
export async function agentManifest(ctx: Ctx, ref: string, prefix: string) {
  return manifestFor(ctx.services.caches.manifests, ctx.em, await merchantByRef(ctx.em, ref), prefix);
}

export async function agentJwks(ctx: Ctx, ref: string) {
  return merchantJwks(ctx.em, (await merchantByRef(ctx.em, ref)).id);
}

export async function agentCatalog(ctx: Ctx, ref: string) {
  const m = await merchantByRef(ctx.em, ref);
  return { items: (await listCatalogItems(ctx.em, m.id, true)).map(presentCatalogItem) };
}

export async function openCheckout(ctx: Ctx, ref: string, prefix: string, body: CreateCheckoutBody) {
  return createCheckout(ctx, await merchantByRef(ctx.em, ref), prefix, body);
}

export async function pollCheckout(ctx: Ctx, ref: string, sessionId: string) {
  const m = await merchantByRef(ctx.em, ref);
  return sessionView(await findSession(ctx.em, m, sessionId), ctx.services.now());
}

/** Settle with the JSON body or the x402 headers (modules/x402): one settle path, settleSession. */
export async function settleCheckout(ctx: Ctx, ref: string, sessionId: string, body: SettleBody | undefined, transport: X402Transport) {
  return settleAnyTransport(ctx, await merchantByRef(ctx.em, ref), sessionId, body, transport);
}
