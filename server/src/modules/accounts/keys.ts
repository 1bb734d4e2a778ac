import { isScope, SCOPES, type ApiKeyObject, type ApiKeyWithSecret, type CreateKeyBody, type RollKeyBody, type Scope } from '@svc/contract';
import { respondIn, type AuthContext, type AuthedCtx as Authed } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { createApiKey } from './service.js';
import { findProjectKey, listProjectKeys, markKeyRevoked, markKeyRolled, type KeyRow } from './store.js';

/** Default grace period of a roll: the old secret keeps working for 24 h. */
export const DEFAULT_ROLL_GRACE_SECONDS = 86_400;

export function presentKey(k: KeyRow): ApiKeyObject {
  const scopes = k.scopes.filter(isScope);
  return {
    id: k.id,
    name: k.name ?? null,
    mode: k.mode,
    scopes,
    restricted: SCOPES.some((s) => !scopes.includes(s)),
    last4: k.last4,
    created_at: k.createdAt.toISOString(),
    last_used_at: k.lastUsedAt?.toISOString() ?? null,
    expires_at: k.expiresAt?.toISOString() ?? null,
    revoked_at: k.revokedAt?.toISOString() ?? null,
    rolled_to: k.rolledTo ?? null,
  };
}

/** Keys manage keys of their own mode only (modes are kept apart, like Stripe's); a signed-in member mints both. */
function assertSameMode(auth: AuthContext, mode: 'test' | 'live') {
  if (mode !== auth.mode && auth.via !== 'session') {
    throw new ApiError('KEY_MODE_FORBIDDEN', `A ${auth.mode} key cannot mint or manage ${mode} keys; sign in to the dashboard to mint ${mode} keys.`);
  }
}

/** A caller never hands out a scope it does not hold (no escalation through minting or rolling). */
function assertHolds(auth: AuthContext, scopes: readonly string[], what: string) {
  const missing = scopes.filter((s) => !auth.scopes.includes(s as Scope));
  if (missing.length > 0) throw new ApiError('INSUFFICIENT_SCOPE', `The calling key cannot ${what} with scopes it does not hold: ${missing.join(', ')}.`);
}

async function findKey(ctx: Authed, id: string, lock = false): Promise<KeyRow> {
  const key = hasPrefix(id, 'key') ? await findProjectKey(ctx.em, { id, projectId: ctx.auth.projectId, mode: ctx.auth.mode }, lock) : null;
  if (!key) throw new ApiError('NOT_FOUND', 'No such API key.');
  return key;
}

/** GET /v1/keys: the project's keys in the caller's mode, newest first. */
export async function listKeys(ctx: Authed, q: { limit: number; cursor?: string }) {
  if (q.cursor && !hasPrefix(q.cursor, 'key')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const rows = await listProjectKeys(ctx.em, { projectId: ctx.auth.projectId, mode: ctx.auth.mode, ...(q.cursor ? { beforeId: q.cursor } : {}), limit: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map(presentKey), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

/** POST /v1/keys: a standard or restricted key; the secret is in this response only. */
export async function mintKey(ctx: Authed, body: CreateKeyBody): Promise<ApiKeyWithSecret> {
  assertSameMode(ctx.auth, body.mode);
  const scopes = body.scopes ? [...new Set(body.scopes)] : [...ctx.auth.scopes];
  assertHolds(ctx.auth, scopes, 'mint a key');
  return ctx.em.transactional(async (tx) => {
    const { key, secret } = await createApiKey(tx, { projectId: ctx.auth.projectId, mode: body.mode, scopes, name: body.name ?? null, now: ctx.services.now() });
    return respondIn(ctx, tx, 201, { ...presentKey(key), secret });
  });
}

/**
 * POST /v1/keys/{id}/roll: a new key with the same name, mode and scopes; the old one keeps
 * working for the grace period (0: revoked now) and names its successor. One transaction with
 * the old row locked, so two concurrent rolls cannot both succeed.
 */
export async function rollKey(ctx: Authed, id: string, body: RollKeyBody): Promise<ApiKeyWithSecret> {
  const grace = body.grace_period_seconds ?? DEFAULT_ROLL_GRACE_SECONDS;
  return ctx.em.transactional(async (tx) => {
    const old = await findKey({ ...ctx, em: tx }, id, true);
    const now = ctx.services.now();
    if (old.revokedAt || old.rolledTo || (old.expiresAt && old.expiresAt <= now)) {
      throw new ApiError('KEY_NOT_ACTIVE', old.rolledTo ? `The key was already rolled to ${old.rolledTo}; roll that one.` : undefined);
    }
    assertHolds(ctx.auth, old.scopes, 'roll a key');
    const { key, secret } = await createApiKey(tx, { projectId: old.projectId, mode: old.mode, scopes: old.scopes as Scope[], name: old.name ?? null, now });
    await markKeyRolled(tx, old, { rolledTo: key.id, expiresAt: new Date(now.getTime() + grace * 1000), revokedAt: grace === 0 ? now : null });
    return respondIn(ctx, tx, 200, { ...presentKey(key), secret });
  });
}

/** DELETE /v1/keys/{id}: revoked now (idempotent). */
export async function revokeKey(ctx: Authed, id: string): Promise<ApiKeyObject> {
  return ctx.em.transactional(async (tx) => {
    const key = await findKey({ ...ctx, em: tx }, id, true);
    if (!key.revokedAt) await markKeyRevoked(tx, key, ctx.services.now());
    return presentKey(key);
  });
}
