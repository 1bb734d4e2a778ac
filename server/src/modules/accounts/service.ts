import { isScope, SCOPES, type Scope } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { randomToken, safeEqual, sha256 } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import type { AuthContext, Mode } from '../../http/context.js';
import {
  findKeyById,
  findKeyByLookup,
  findProject,
  insertApiKey,
  insertOrganizationWithProject,
  listAllProjects,
  listKeyRows,
  markKeyRevoked,
  touchApiKey,
  type KeyRow,
  type ProjectRow,
} from './store.js';

export const KEY_PREFIX: Record<Mode, string> = { test: 'svc_test_', live: 'svc_live_' };
const KEY_RE = /^svc_(test|live)_[A-Za-z0-9_-]{43,}$/;

export async function createProject(em: Em, name: string, opts: { isDefault?: boolean; now: Date }): Promise<ProjectRow> {
  return insertOrganizationWithProject(em, { organizationId: newId('org'), organizationName: name, projectId: newId('proj'), projectName: name, isDefault: opts.isDefault ?? false, now: opts.now });
}

export async function getProject(em: Em, id: string): Promise<ProjectRow | null> {
  return findProject(em, id);
}

/** Every project, oldest first (the admin CLI's `projects list`). */
export async function listProjects(em: Em): Promise<ProjectRow[]> {
  return listAllProjects(em);
}

/** Keys, oldest first, optionally of one project and/or mode; revoked keys only when asked (the admin CLI's `keys list`). Never the secret. */
export async function listApiKeys(em: Em, filter: { projectId?: string; mode?: Mode; includeRevoked?: boolean } = {}): Promise<KeyRow[]> {
  return listKeyRows(em, filter);
}

/** Mints a key; the secret is returned once and only its sha256 and last four are stored. */
export async function createApiKey(em: Em, input: { projectId: string; mode: Mode; scopes?: Scope[]; name?: string | null; now: Date }) {
  const scopes = input.scopes ?? [...SCOPES];
  const secret = KEY_PREFIX[input.mode] + randomToken(32);
  const key = await insertApiKey(em, {
    id: newId('key'),
    projectId: input.projectId,
    mode: input.mode,
    name: input.name ?? null,
    lookup: sha256(secret).slice(0, 16),
    secretHash: sha256(secret),
    last4: secret.slice(-4),
    scopes,
    now: input.now,
  });
  return { key, secret };
}

export async function revokeApiKey(em: Em, keyId: string, now: Date): Promise<boolean> {
  const key = await findKeyById(em, keyId);
  if (!key) return false;
  if (!key.revokedAt) await markKeyRevoked(em, key, now);
  return true;
}

/** Resolves a presented secret to its key; unknown, malformed and revoked keys are all INVALID_API_KEY. */
export async function authenticate(em: Em, secret: string, now: Date): Promise<AuthContext> {
  if (!KEY_RE.test(secret)) throw new ApiError('INVALID_API_KEY');
  const hash = sha256(secret);
  const key = await findKeyByLookup(em, hash.slice(0, 16));
  if (!key || !safeEqual(key.secretHash, hash) || key.revokedAt) throw new ApiError('INVALID_API_KEY');
  // A rolled key works until the end of its grace period.
  if (key.expiresAt && key.expiresAt <= now) throw new ApiError('INVALID_API_KEY', 'The API key was rolled and its grace period has ended; use the key that replaced it.');
  if (!key.lastUsedAt || now.getTime() - key.lastUsedAt.getTime() > 60_000) {
    // Coarse last-used tracking (once a minute) so a hot key does not write on every request.
    await touchApiKey(em, key.id, now);
  }
  const prefixMode: Mode = secret.startsWith('svc_live_') ? 'live' : 'test';
  if (prefixMode !== key.mode) throw new ApiError('INVALID_API_KEY');
  return {
    via: 'key',
    keyId: key.id,
    userId: null,
    sessionId: null,
    projectId: key.projectId,
    mode: key.mode,
    livemode: key.mode === 'live',
    scopes: key.scopes.filter(isScope),
  };
}
