import type { CreateCheckoutBody } from '@svc/contract';
import type { Ctx } from '../../http/context.js';
import { createCheckout, findSession, sessionView } from '../checkout/index.js';
import { listCatalogItems, presentCatalogItem } from '../catalog/index.js';
import { publicJwk } from '../merchants/index.js';
import { hasPrefix } from '../../lib/ids.js';
import { refKeyOf, type CacheToken, type CachedCatalog, type CachedManifest, type MerchantSnapshot } from './cache.js';
import { buildManifest, merchantByRef, merchantRefByDomain } from './discovery.js';

/**
 * The agent-facing calls, each by merchant reference (`mrch_` id or slug; see merchantByRef)
 * and, where links are returned, the path prefix the agent used (`/m/<ref>`, or empty on
 * the discovery host and the merchant's own domain).
 *
 * The reads (manifest, catalog, key set, host routing) go through services.caches.agent
 * (./cache.ts says how it is invalidated): warm, they run no SQL. The writes (checkout,
 * settle) read the merchant from the database as before.
 */

const refKey = (ref: string) => refKeyOf(ref, hasPrefix(ref, 'mrch'));

/** The published merchant `ref` names: cached, else read (and remembered under `token`). */
async function publishedMerchant(ctx: Ctx, ref: string, token: CacheToken): Promise<MerchantSnapshot> {
  const cache = ctx.services.caches.agent;
  const key = refKey(ref);
  const cached = cache.merchant(key);
  if (cached) return cached;
  const m = await merchantByRef(ctx.em, ref);
  cache.rememberMerchant(token, key, m);
  return m;
}

export async function agentManifest(ctx: Ctx, ref: string, prefix: string): Promise<CachedManifest> {
  const cache = ctx.services.caches.agent;
  const hit = cache.manifest(refKey(ref), prefix);
  if (hit) return hit;
  const token = cache.begin();
  const m = await publishedMerchant(ctx, ref, token);
  const doc = await buildManifest(ctx.em, m, prefix);
  cache.rememberManifest(token, refKey(ref), m, prefix, doc);
  return doc;
}

export async function agentJwks(ctx: Ctx, ref: string) {
  const m = await publishedMerchant(ctx, ref, ctx.services.caches.agent.begin());
  return { keys: [publicJwk(m)] };
}

export async function agentCatalog(ctx: Ctx, ref: string): Promise<CachedCatalog['body']> {
  const cache = ctx.services.caches.agent;
  const hit = cache.catalog(refKey(ref));
  if (hit) return hit.body;
  const token = cache.begin();
  const m = await publishedMerchant(ctx, ref, token);
  const body = { items: (await listCatalogItems(ctx.em, m.id, true)).map(presentCatalogItem) };
  cache.rememberCatalog(token, refKey(ref), m, { body });
  return body;
}

/** The merchant whose own storefront domain is `host` (agent-host routing), or null. */
export async function agentRefForHost(ctx: Ctx, host: string): Promise<string | null> {
  const cache = ctx.services.caches.agent;
  const cached = cache.merchantIdForHost(host);
  if (cached) return cached;
  const token = cache.begin();
  const id = await merchantRefByDomain(ctx.em, host);
  if (id) cache.rememberHost(token, host, id);
  return id;
}

/** For the write paths (checkout, settle): the merchant row from the database; a cached entry older than it is dropped. */
export async function currentMerchant(ctx: Ctx, ref: string) {
  const m = await merchantByRef(ctx.em, ref);
  ctx.services.caches.agent.sawConfigVersion(m.id, m.configVersion);
  return m;
}

/**
 * The merchant of a settle, by its URL reference (settlement's SettleMerchantRef): the settle's
 * own first statement reads it; `resolve` reads it the usual way where a settle needs that (x402
 * answers, a session of another merchant), once; `seen` drops a cached entry older than the row.
 */
export function settleMerchant(ctx: Ctx, ref: string) {
  let resolved: ReturnType<typeof currentMerchant> | undefined;
  return {
    ref,
    resolve: () => (resolved ??= currentMerchant(ctx, ref)),
    seen: (m: { id: string; configVersion: number }) => ctx.services.caches.agent.sawConfigVersion(m.id, m.configVersion),
  };
}

export async function openCheckout(ctx: Ctx, ref: string, prefix: string, body: CreateCheckoutBody) {
  return createCheckout(ctx, await currentMerchant(ctx, ref), prefix, body);
}

export async function pollCheckout(ctx: Ctx, ref: string, sessionId: string) {
  const m = await currentMerchant(ctx, ref);
  return sessionView(await findSession(ctx.em, m, sessionId), ctx.services.now());
}
