import { LockMode } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { DeviceCode, Membership, SignInToken, User, UserSession } from './entity.js';

/**
 * The auth module's data access: every query on `users`, `memberships`, `sign_in_tokens`,
 * `user_sessions` and `device_codes`. Entities (./entity.ts) through the EntityManager, plus
 * the user upsert an entity cannot say in one statement. No rules here: ./service.ts decides.
 */

export type SignInTokenRow = InstanceType<typeof SignInToken.class>;
export type UserSessionRow = InstanceType<typeof UserSession.class>;
export type DeviceCodeRow = InstanceType<typeof DeviceCode.class>;
export type MembershipRow = InstanceType<typeof Membership.class>;

// --- users and memberships -----------------------------------------------------------------

/**
 * The user of an email, created if absent. An atomic upsert on the unique lower(email) index,
 * so two first sign-ins of one address at the same moment make one user (SQL on purpose:
 * the ORM has no insert-or-read in one statement). Returns whether this call created it.
 */
export async function upsertUserByEmail(tx: Em, id: string, email: string, now: Date): Promise<{ id: string; email: string; created: boolean }> {
  const inserted = await tx.execute<Array<{ id: string; email: string }>>(
    'insert into users (id, email, created_at) values (?, ?, ?) on conflict ((lower(email))) do nothing returning id, email',
    [id, email, now],
  );
  if (inserted[0]) return { ...inserted[0], created: true };
  const rows = await tx.execute<Array<{ id: string; email: string }>>('select id, email from users where lower(email) = lower(?)', [email]);
  return { ...rows[0]!, created: false };
}

export type UserRow = InstanceType<typeof User.class>;

export async function findUserOrFail(em: Em, id: string): Promise<UserRow> {
  return em.findOneOrFail(User, { id });
}

/** A membership, flushed with whatever else the transaction has pending (a new account's organization and project). */
export async function insertMembership(tx: Em, row: { userId: string; organizationId: string; role: 'owner' | 'member'; now: Date }): Promise<void> {
  tx.create(Membership, { userId: row.userId, organizationId: row.organizationId, role: row.role, createdAt: row.now });
  await tx.flush();
}

/** The organization of the user's oldest membership, or undefined. */
export async function firstOrganizationOf(em: Em, userId: string): Promise<string | undefined> {
  const memberships = await em.find(Membership, { userId }, { orderBy: { createdAt: 'asc' }, limit: 1 });
  return memberships[0]?.organizationId;
}

/** The organizations the user belongs to, oldest membership first. */
export async function organizationsOf(em: Em, userId: string): Promise<string[]> {
  const memberships = await em.find(Membership, { userId }, { orderBy: { createdAt: 'asc', organizationId: 'asc' } });
  return memberships.map((m) => m.organizationId);
}

/** Whether anyone is a member of the organization (memberships_organization_idx). */
export async function organizationHasMembers(em: Em, organizationId: string): Promise<boolean> {
  return (await em.count(Membership, { organizationId })) > 0;
}

/** The installation's first account (oldest user), or null before anyone signed in. */
export async function firstUser(em: Em): Promise<UserRow | null> {
  return (await em.find(User, {}, { orderBy: { createdAt: 'asc', id: 'asc' }, limit: 1 }))[0] ?? null;
}

/**
 * Serializes who owns the installation's default project until the transaction ends: a first
 * sign-in and `keys create` decide it under this lock (a transaction-scoped advisory lock, as no
 * row exists yet to lock when neither a user nor the default project does).
 */
export async function lockDefaultProjectOwnership(tx: Em): Promise<void> {
  await tx.execute("select pg_advisory_xact_lock(hashtextextended('svc:default-project-owner', 0))");
}

export async function findMembership(em: Em, userId: string, organizationId: string): Promise<MembershipRow | null> {
  return em.findOne(Membership, { userId, organizationId });
}

// --- sign-in links -------------------------------------------------------------------------

export async function insertSignInToken(em: Em, row: { id: string; tokenHash: string; email: string; deviceCodeId: string | null; expiresAt: Date; now: Date }): Promise<void> {
  em.create(SignInToken, { id: row.id, tokenHash: row.tokenHash, email: row.email, deviceCodeId: row.deviceCodeId, expiresAt: row.expiresAt, usedAt: null, createdAt: row.now });
  await em.flush();
}

/** The link of a token hash; `lock`: FOR UPDATE (single use is decided under it). */
export async function findSignInToken(em: Em, tokenHash: string, lock = false): Promise<SignInTokenRow | null> {
  return em.findOne(SignInToken, { tokenHash }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
}

/** Spends the link; written at the transaction's next flush. */
export function markSignInTokenUsed(link: SignInTokenRow, now: Date): void {
  link.usedAt = now;
}

// --- browser sessions ----------------------------------------------------------------------

export async function insertUserSession(tx: Em, row: { id: string; tokenHash: string; userId: string; expiresAt: Date; now: Date }): Promise<void> {
  tx.create(UserSession, { id: row.id, tokenHash: row.tokenHash, userId: row.userId, createdAt: row.now, expiresAt: row.expiresAt, revokedAt: null });
  await tx.flush();
}

export async function findUserSessionByTokenHash(em: Em, tokenHash: string): Promise<UserSessionRow | null> {
  return em.findOne(UserSession, { tokenHash });
}

export async function findUserSession(em: Em, id: string): Promise<UserSessionRow | null> {
  return em.findOne(UserSession, { id });
}

export async function markUserSessionRevoked(em: Em, session: UserSessionRow, now: Date): Promise<void> {
  session.revokedAt = now;
  await em.flush();
}

// --- device codes (RFC 8628) ---------------------------------------------------------------

export async function insertDeviceCode(em: Em, row: { id: string; deviceCodeHash: string; userCode: string; intervalSeconds: number; expiresAt: Date; now: Date }): Promise<void> {
  em.create(DeviceCode, {
    id: row.id,
    deviceCodeHash: row.deviceCodeHash,
    userCode: row.userCode,
    status: 'pending',
    intervalSeconds: row.intervalSeconds,
    expiresAt: row.expiresAt,
    lastPolledAt: null,
    userId: null,
    projectId: null,
    keyId: null,
    createdAt: row.now,
  });
  await em.flush();
}

/** The pending device code of a device code hash, or null. */
export async function findPendingDeviceByHash(em: Em, deviceCodeHash: string): Promise<DeviceCodeRow | null> {
  return em.findOne(DeviceCode, { deviceCodeHash, status: 'pending' });
}

/** The pending device code showing `userCode`, or null; `lock`: FOR UPDATE. */
export async function findPendingDeviceByUserCode(em: Em, userCode: string, lock = false): Promise<DeviceCodeRow | null> {
  return em.findOne(DeviceCode, { userCode, status: 'pending' }, lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {});
}

/** The device code of a hash, locked FOR UPDATE (a poll decides under it). */
export async function findDeviceForUpdate(tx: Em, deviceCodeHash: string): Promise<DeviceCodeRow | null> {
  return tx.findOne(DeviceCode, { deviceCodeHash }, { lockMode: LockMode.PESSIMISTIC_WRITE });
}

/** Records a poll: its time, and the interval when it grew (a poll faster than the interval). */
export async function markDevicePolled(tx: Em, dc: DeviceCodeRow, change: { lastPolledAt: Date; intervalSeconds?: number }): Promise<void> {
  dc.lastPolledAt = change.lastPolledAt;
  if (change.intervalSeconds !== undefined) dc.intervalSeconds = change.intervalSeconds;
  await tx.flush();
}

/** The code delivered its key (once). */
export async function markDeviceDelivered(tx: Em, dc: DeviceCodeRow, change: { lastPolledAt: Date; keyId: string }): Promise<void> {
  dc.lastPolledAt = change.lastPolledAt;
  dc.status = 'delivered';
  dc.keyId = change.keyId;
  await tx.flush();
}

/** A member approved the code for their project. */
export async function markDeviceApproved(tx: Em, dc: DeviceCodeRow, change: { userId: string | null; projectId: string }): Promise<void> {
  dc.status = 'approved';
  dc.userId = change.userId;
  dc.projectId = change.projectId;
  await tx.flush();
}
