import { LockMode } from '@mikro-orm/core';
import type { Mode, Scope } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { ApiKey, Organization, Project } from './entity.js';

/**
 * The accounts module's data access: every query on `organizations`, `projects` and
 * `api_keys`. Entities (./entity.ts) through the EntityManager, plus the two statements an
 * entity cannot say in one round trip. No rules here: ./service.ts and ./keys.ts decide.
 */

export type ProjectRow = InstanceType<typeof Project.class>;
export type KeyRow = InstanceType<typeof ApiKey.class>;

// --- organizations and projects ------------------------------------------------------------

export type NewProject = { organizationId: string; organizationName: string; projectId: string; projectName: string; isDefault: boolean; now: Date };

/** An organization and its project, written at the transaction's next flush (the caller's, with its own rows). */
export function addOrganizationWithProject(tx: Em, input: NewProject): ProjectRow {
  const org = tx.create(Organization, { id: input.organizationId, name: input.organizationName, createdAt: input.now });
  return tx.create(Project, { id: input.projectId, organizationId: org.id, name: input.projectName, isDefault: input.isDefault, createdAt: input.now });
}

/** An organization and its project, in a transaction of their own. */
export async function insertOrganizationWithProject(em: Em, input: NewProject): Promise<ProjectRow> {
  return em.transactional(async (tx) => {
    const project = addOrganizationWithProject(tx, input);
    await tx.flush();
    return project;
  });
}

export async function findDefaultProject(em: Em): Promise<ProjectRow | null> {
  return em.findOne(Project, { isDefault: true });
}

/** Makes the project the installation's default (the caller holds the installation-owner lock and saw no default). */
export async function markProjectDefault(tx: Em, project: ProjectRow): Promise<void> {
  project.isDefault = true;
  await tx.flush();
}

/** The projects of these organizations, oldest first. */
export async function listProjectsOfOrganizations(em: Em, organizationIds: string[]): Promise<ProjectRow[]> {
  if (organizationIds.length === 0) return [];
  return em.find(Project, { organizationId: { $in: organizationIds } }, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

export async function findProject(em: Em, id: string): Promise<ProjectRow | null> {
  return em.findOne(Project, { id });
}

export async function findProjectOrFail(em: Em, id: string): Promise<ProjectRow> {
  return em.findOneOrFail(Project, { id });
}

/** Every project, oldest first. */
export async function listAllProjects(em: Em): Promise<ProjectRow[]> {
  return em.find(Project, {}, { orderBy: { createdAt: 'asc', id: 'asc' } });
}

/** The organization's first project (oldest, then lowest id), or null. */
export async function firstProjectOfOrganization(em: Em, organizationId: string): Promise<ProjectRow | null> {
  return (await em.find(Project, { organizationId }, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: 1 }))[0] ?? null;
}

/**
 * Locks the project row FOR NO KEY UPDATE until the transaction ends: writers of one
 * project take turns (a count then insert cannot go stale) while inserts that reference
 * the project are not blocked.
 */
export async function lockProjectForInserts(tx: Em, projectId: string): Promise<void> {
  await tx.execute('select id from projects where id = ? for no key update', [projectId]);
}

// --- api keys ------------------------------------------------------------------------------

export type NewApiKey = { id: string; projectId: string; mode: Mode; name: string | null; lookup: string; secretHash: string; last4: string; scopes: Scope[]; now: Date };

export async function insertApiKey(em: Em, input: NewApiKey): Promise<KeyRow> {
  const { now, ...fields } = input;
  const key = em.create(ApiKey, { ...fields, createdAt: now });
  await em.flush();
  return key;
}

/** The key whose secret hash starts with `lookup` (the index lookup; the caller compares the full hash). */
export async function findKeyByLookup(em: Em, lookup: string): Promise<KeyRow | null> {
  return em.findOne(ApiKey, { lookup });
}

export async function findKeyById(em: Em, id: string): Promise<KeyRow | null> {
  return em.findOne(ApiKey, { id });
}

export async function findKeyByIdOrFail(em: Em, id: string): Promise<KeyRow> {
  return em.findOneOrFail(ApiKey, { id });
}

/** A key of the project and mode; `lock`: FOR UPDATE, re-read (inside a transaction). */
export async function findProjectKey(em: Em, where: { id: string; projectId: string; mode: Mode }, lock: boolean): Promise<KeyRow | null> {
  return em.findOne(ApiKey, where, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE, refresh: true } : {});
}

/** The project's keys of a mode, highest id first, below `beforeId` when given. */
export async function listProjectKeys(em: Em, q: { projectId: string; mode: Mode; beforeId?: string; limit: number }): Promise<KeyRow[]> {
  const where: Record<string, unknown> = { projectId: q.projectId, mode: q.mode };
  if (q.beforeId) where.id = { $lt: q.beforeId };
  return em.find(ApiKey, where, { orderBy: { id: 'desc' }, limit: q.limit });
}

/** Keys, oldest first, optionally of one project and/or mode; revoked keys only when asked. */
export async function listKeyRows(em: Em, filter: { projectId?: string; mode?: Mode; includeRevoked?: boolean }): Promise<KeyRow[]> {
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

export async function markKeyRevoked(em: Em, key: KeyRow, now: Date): Promise<void> {
  key.revokedAt = now;
  await em.flush();
}

/** The old key of a roll names its successor and expires at the end of the grace period (`revokedAt` when it has none). */
export async function markKeyRolled(em: Em, key: KeyRow, change: { rolledTo: string; expiresAt: Date; revokedAt: Date | null }): Promise<void> {
  key.rolledTo = change.rolledTo;
  key.expiresAt = change.expiresAt;
  if (change.revokedAt) key.revokedAt = change.revokedAt;
  await em.flush();
}

/** Stamps a key as used, without loading it into the unit of work (runs on authenticated requests). */
export async function touchApiKey(em: Em, keyId: string, now: Date): Promise<void> {
  await em.execute('update api_keys set last_used_at = ? where id = ?', [now, keyId]);
}
