import { SCOPES, type Scope } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { randomToken, safeEqual, sha256 } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import type { AuthContext, Mode } from '../../http/context.js';
import { ApiKey, Organization, Project } from './entity.js';

export const KEY_PREFIX: Record<Mode, string> = { test: 'svc_test_', live: 'svc_live_' };
const KEY_RE = /^svc_(test|live)_[A-Za-z0-9_-]{43,}$/;

export async function createProject(em: Em, name: string, opts: { isDefault?: boolean } = {}) {
  return em.transactional(async (tx) => {
    const org = tx.create(Organization, { id: newId('org'), name });
    await tx.flush(); // no ORM relation between the two, so order the inserts explicitly
    const project = tx.create(Project, { id: newId('proj'), organizationId: org.id, name, isDefault: opts.isDefault ?? false });
    await tx.flush();
    return project;
  });
}

/** The installation's default project, created on first use (unique index keeps it single). */
export async function defaultProject(em: Em) {
  const existing = await em.findOne(Project, { isDefault: true });
  if (existing) return existing;
  try {
    return await createProject(em, 'Default project', { isDefault: true });
  } catch (err) {
    const again = await em.fork().findOne(Project, { isDefault: true });
    if (again) return again;
    throw err;
  }
}

export async function getProject(em: Em, id: string) {
  return em.findOne(Project, { id });
}

/** Mints a key; the secret is returned once and only its sha256 and last four are stored. */
export async function createApiKey(em: Em, input: { projectId: string; mode: Mode; scopes?: Scope[]; name?: string | null }) {
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
  });
  await em.flush();
  return { key, secret };
}

export async function revokeApiKey(em: Em, keyId: string): Promise<boolean> {
  const key = await em.findOne(ApiKey, { id: keyId });
  if (!key) return false;
  if (!key.revokedAt) {
    key.revokedAt = new Date();
    await em.flush();
  }
  return true;
}

/** Resolves a presented secret to its key; unknown, malformed and revoked keys are all INVALID_API_KEY. */
export async function authenticate(em: Em, secret: string): Promise<AuthContext> {
  if (!KEY_RE.test(secret)) throw new ApiError('INVALID_API_KEY');
  const hash = sha256(secret);
  const key = await em.findOne(ApiKey, { lookup: hash.slice(0, 16) });
  if (!key || !safeEqual(key.secretHash, hash) || key.revokedAt) throw new ApiError('INVALID_API_KEY');
  if (!key.lastUsedAt || Date.now() - key.lastUsedAt.getTime() > 60_000) {
    // Coarse last-used tracking (once a minute) so a hot key does not write on every request.
    await em.execute('update api_keys set last_used_at = now() where id = ?', [key.id]);
  }
  const prefixMode: Mode = secret.startsWith('svc_live_') ? 'live' : 'test';
  if (prefixMode !== key.mode) throw new ApiError('INVALID_API_KEY');
  return {
    keyId: key.id,
    projectId: key.projectId,
    mode: key.mode,
    livemode: key.mode === 'live',
    scopes: key.scopes.filter((s): s is Scope => (SCOPES as readonly string[]).includes(s)),
  };
}

export async function describeKey(em: Em, auth: AuthContext) {
  const key = await em.findOneOrFail(ApiKey, { id: auth.keyId });
  const project = await em.findOneOrFail(Project, { id: auth.projectId });
  return {
    key: {
      id: key.id,
      name: key.name ?? null,
      mode: key.mode,
      scopes: auth.scopes,
      last4: key.last4,
      created_at: key.createdAt.toISOString(),
    },
    project: { id: project.id, name: project.name, organization_id: project.organizationId },
    livemode: auth.livemode,
  };
}
