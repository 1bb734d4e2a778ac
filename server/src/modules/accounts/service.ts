import { isScope, SCOPES, type Scope } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { randomToken, safeEqual, sha256 } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import type { AuthContext, Mode } from '../../http/context.js';
import { ApiKey, Organization, Project } from './entity.js';
import { User } from '../auth/entity.js';
import { touchApiKey } from './store.js';

export const KEY_PREFIX: Record<Mode, string> = { test: 'svc_test_', live: 'svc_live_' };
const KEY_RE = /^svc_(test|live)_[A-Za-z0-9_-]{43,}$/;

export async function createProject(em: Em, name: string, opts: { isDefault?: boolean; now: Date }) {
  return em.transactional(async (tx) => {
    const org = tx.create(Organization, { id: newId('org'), name, createdAt: opts.now });
    const project = tx.create(Project, { id: newId('proj'), organizationId: org.id, name, isDefault: opts.isDefault ?? false, createdAt: opts.now });
    await tx.flush();
    return project;
  });
}

/** The installation's default project, created on first use (unique index keeps it single). */
export async function defaultProject(em: Em, now: Date) {
  const existing = await em.findOne(Project, { isDefault: true });
  if (existing) return existing;
  try {
    return await createProject(em, 'Default project', { isDefault: true, now });
  } catch (err) {
    const again = await em.fork().findOne(Project, { isDefault: true });
    if (again) return again;
    throw err;
  }
}

export async function getProject(em: Em, id: string) {
  return em.findOne(Project, { id });
}

/** Every project, oldest first (the admin CLI's `projects list`). */
export async function listProjects(em: Em) {
  return em.find(Project, {}, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** Keys, oldest first, optionally of one project and/or mode; revoked keys only when asked (the admin CLI's `keys list`). Never the secret. */
export async function listApiKeys(em: Em, filter: { projectId?: string; mode?: Mode; includeRevoked?: boolean } = {}) {
  return em.find(
    ApiKey,
    {
      ...(filter.projectId ? { projectId: filter.projectId } : {}),
      ...(filter.mode ? { mode: filter.mode } : {}),
      ...(filter.includeRevoked ? {} : { revokedAt: null }),
    },
    { orderBy: { createdAt: 'asc', id: 'asc' } },
  );
}

/** Mints a key; the secret is returned once and only its sha256 and last four are stored. */
export async function createApiKey(em: Em, input: { projectId: string; mode: Mode; scopes?: Scope[]; name?: string | null; now: Date }) {
  const scopes = input.scopes ?? [...SCOPES];
  const secret = KEY_PREFIX[input.mode] + randomToken(32);
  const key = em.create(ApiKey, {
    id: newId('key'),
    projectId: input.projectId,
    mode: input.mode,
    name: input.name ?? null,
    lookup: sha256(secret).slice(0, 16),
    secretHash: sha256(secret),
    last4: secret.slice(-4),
    scopes,
    createdAt: input.now,
  });
  await em.flush();
  return { key, secret };
}

export async function revokeApiKey(em: Em, keyId: string, now: Date): Promise<boolean> {
  const key = await em.findOne(ApiKey, { id: keyId });
  if (!key) return false;
  if (!key.revokedAt) {
    key.revokedAt = now;
    await em.flush();
  }
  return true;
}

/** Resolves a presented secret to its key; unknown, malformed and revoked keys are all INVALID_API_KEY. */
export async function authenticate(em: Em, secret: string, now: Date): Promise<AuthContext> {
  if (!KEY_RE.test(secret)) throw new ApiError('INVALID_API_KEY');
  const hash = sha256(secret);
  const key = await em.findOne(ApiKey, { lookup: hash.slice(0, 16) });
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

export async function describeKey(em: Em, auth: AuthContext) {
  const key = auth.keyId ? await em.findOneOrFail(ApiKey, { id: auth.keyId }) : null;
  const user = auth.userId ? await em.findOneOrFail(User, { id: auth.userId }) : null;
  const project = await em.findOneOrFail(Project, { id: auth.projectId });
  return {
    key: key && {
      id: key.id,
      name: key.name ?? null,
      mode: key.mode,
      scopes: auth.scopes,
      last4: key.last4,
      created_at: key.createdAt.toISOString(),
    },
    user: user && { id: user.id, email: user.email },
    project: { id: project.id, name: project.name, organization_id: project.organizationId },
    livemode: auth.livemode,
  };
}
