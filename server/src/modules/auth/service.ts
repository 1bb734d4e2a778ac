import { randomInt } from 'node:crypto';
import { SCOPES, type CliPollResult, type EmailStartBody } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { AuthContext, Ctx } from '../../http/context.js';
import { randomToken, sha256 } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { newId } from '../../lib/ids.js';
import {
  addOrganizationWithProject,
  createApiKey,
  findDefaultProject,
  findKeyByIdOrFail,
  findProject,
  findProjectOrFail,
  firstProjectOfOrganization,
  listProjectsOfOrganizations,
  markProjectDefault,
  presentKey,
  type ProjectRow,
} from '../accounts/index.js';
import { consumeRateLimit } from '../checkout/index.js';
import { confirmSignInPage, linkGonePage } from './pages.js';
import {
  findDeviceForUpdate,
  findMembership,
  findPendingDeviceByHash,
  findPendingDeviceByUserCode,
  findSignInToken,
  findUserOrFail,
  findUserSession,
  findUserSessionByTokenHash,
  firstOrganizationOf,
  firstUser,
  insertDeviceCode,
  insertMembership,
  insertSignInToken,
  insertUserSession,
  lockDefaultProjectOwnership,
  markDeviceApproved,
  markDeviceDelivered,
  markDevicePolled,
  markSignInTokenUsed,
  markUserSessionRevoked,
  organizationHasMembers,
  organizationsOf,
  upsertUserByEmail,
} from './store.js';

export const LINK_TTL_SECONDS = 900;
export const DEVICE_TTL_SECONDS = 900;
export const DEVICE_INTERVAL_SECONDS = 5;
const SIGN_IN_WINDOW_SECONDS = 900;
const STARTS_PER_EMAIL = 5;
const STARTS_PER_IP = 20;
/** RFC 8628 section 6.1: consonants only (no vowels, so no words), 8 characters. */
const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';

const isProduction = (ctx: Ctx) => ctx.services.config.NODE_ENV === 'production';

/** "wdjb mjht", "WDJBMJHT" and "WDJB-MJHT" are one code. */
export function normalizeUserCode(raw: string): string | null {
  const letters = raw.toUpperCase().replace(/[^A-Z]/g, '');
  if (letters.length !== 8 || [...letters].some((ch) => !USER_CODE_ALPHABET.includes(ch))) return null;
  return `${letters.slice(0, 4)}-${letters.slice(4)}`;
}

function newUserCode(): string {
  const letters = Array.from({ length: 8 }, () => USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)]).join('');
  return `${letters.slice(0, 4)}-${letters.slice(4)}`;
}

/** A sign-in link that can still sign in: unused and within its 15 minutes. */
const linkUsable = (link: { usedAt?: Date | null; expiresAt: Date }, now: Date) => !link.usedAt && link.expiresAt > now;
/** A device code still waiting for its approval. */
const devicePending = (dc: { status: string; expiresAt: Date }, now: Date) => dc.status === 'pending' && dc.expiresAt > now;

async function pendingDevice(em: Em, deviceCodeHash: string, now: Date) {
  const dc = await findPendingDeviceByHash(em, deviceCodeHash);
  if (!dc || !devicePending(dc, now)) throw new ApiError('DEVICE_CODE_EXPIRED');
  return dc;
}

/**
 * POST /v1/auth/email/start: the same answer for every well-formed email (no enumeration);
 * the link is mailed after the token row commits, never inside the transaction. A
 * `device_code` (the CLI's own) only makes the link land on the device page: the link
 * approves nothing, and neither the mail nor the link's page names the device's user code,
 * so a stranger who asks for a link to someone else's inbox gains nothing (RFC 8628 5.4;
 * docs/decisions.md, "Device code").
 */
export async function startEmailSignIn(ctx: Ctx, body: EmailStartBody, ip: string, baseUrl: string) {
  const now = ctx.services.now();
  const email = body.email.toLowerCase();
  const human = (what: string) => (retryAfter: number) => `Sign-in links are limited to ${what} per 15 minutes; retry in ${retryAfter} s.`;
  await consumeRateLimit(ctx.em, `signin:ip:${ip}`, STARTS_PER_IP, now, { windowSeconds: SIGN_IN_WINDOW_SECONDS, human: human(`${STARTS_PER_IP} per address`) });
  await consumeRateLimit(ctx.em, `signin:email:${sha256(email)}`, STARTS_PER_EMAIL, now, {
    windowSeconds: SIGN_IN_WINDOW_SECONDS,
    human: human(`${STARTS_PER_EMAIL} per email`),
  });

  const device = body.device_code !== undefined ? await pendingDevice(ctx.em, sha256(body.device_code), now) : null;

  const token = randomToken(32);
  await insertSignInToken(ctx.em, {
    id: newId('sit'),
    tokenHash: sha256(token),
    email,
    deviceCodeId: device?.id ?? null,
    expiresAt: new Date(now.getTime() + LINK_TTL_SECONDS * 1000),
    now,
  });
  const link = `${baseUrl}/v1/auth/verify?token=${encodeURIComponent(token)}`;
  await ctx.services.mailer.sendSignIn({ to: email, link, expiresInMinutes: LINK_TTL_SECONDS / 60, forDevice: device !== null });
  return {
    ok: true as const,
    expires_in: LINK_TTL_SECONDS as 900,
    ...(isProduction(ctx) ? {} : { verify_url: link, dev_token: token }),
  };
}

/** The user's first project (their own organization's, created at first sign-in). */
async function homeProjectOf(em: Em, userId: string): Promise<{ id: string }> {
  const org = await firstOrganizationOf(em, userId);
  const project = org ? await firstProjectOfOrganization(em, org) : null;
  if (!project) throw new ApiError('INVALID_SESSION', 'The signed-in user has no project.');
  return project;
}

/**
 * GET /v1/auth/verify: the link's page, or 410. Reads only: a mail scanner that fetches the
 * link (Outlook's Safe Links, corporate gateways) must not use it up, so the page asks the
 * person to press a button that POSTs the token (verifySignIn).
 */
export async function openSignInLink(ctx: Ctx, token: string | undefined): Promise<{ status: 200 | 410; html: string }> {
  if (!token) return { status: 410, html: linkGonePage() };
  const now = ctx.services.now();
  const link = await findSignInToken(ctx.em, sha256(token));
  if (!link || !linkUsable(link, now)) return { status: 410, html: linkGonePage() };
  return { status: 200, html: confirmSignInPage({ email: link.email, token, forDevice: link.deviceCodeId !== null }) };
}

/** Signed in: the session token and where the browser goes next (the dashboard, or its device page when a CLI asked for the link). */
export type VerifyOutcome = { status: 303; location: string; sessionToken: string; maxAgeSeconds: number } | { status: 410; html: string };

/**
 * POST /v1/auth/verify (the button of the link's page): spends the link (single use, by row lock), creates the account on the
 * first sign-in (user, organization, project, membership) and opens a session. Only the
 * session token's SHA-256 is stored. It approves no device code: a link asked for by a CLI
 * lands on the device page, where the person types the code their terminal shows.
 */
export async function verifySignIn(ctx: Ctx, token: string | undefined): Promise<VerifyOutcome> {
  if (!token) return { status: 410, html: linkGonePage() };
  const now = ctx.services.now();
  const ttl = ctx.services.config.SVC_USER_SESSION_TTL_SECONDS;
  return ctx.em.transactional(async (tx): Promise<VerifyOutcome> => {
    const link = await findSignInToken(tx, sha256(token), true);
    if (!link || !linkUsable(link, now)) return { status: 410, html: linkGonePage() };
    markSignInTokenUsed(link, now);

    const user = await upsertUserByEmail(tx, newId('usr'), link.email, now);
    if (user.created) await homeForNewAccount(tx, user, now);
    const sessionToken = randomToken(32);
    await insertUserSession(tx, { id: newId('uss'), tokenHash: sha256(sessionToken), userId: user.id, expiresAt: new Date(now.getTime() + ttl * 1000), now });
    const location = link.deviceCodeId ? '/dashboard/device' : '/dashboard/';
    return { status: 303, location, sessionToken, maxAgeSeconds: ttl };
  });
}

/**
 * A new account's home project (docs/decisions.md, "The default project belongs to the first
 * account"). The installation's first account owns the default project: it joins the one `keys
 * create` already made, or its own project becomes the default. Every later account gets a
 * project of its own. Decided under the ownership lock, so two first sign-ins at once make one owner.
 */
async function homeForNewAccount(tx: Em, user: { id: string; email: string }, now: Date): Promise<void> {
  await lockDefaultProjectOwnership(tx);
  const dflt = await findDefaultProject(tx);
  if (dflt && !(await organizationHasMembers(tx, dflt.organizationId))) {
    await insertMembership(tx, { userId: user.id, organizationId: dflt.organizationId, role: 'owner', now });
    return;
  }
  const first = await firstUser(tx);
  const isDefault = !dflt && first?.id === user.id;
  // The organization, its project and the membership are written in one flush.
  const organizationId = newId('org');
  addOrganizationWithProject(tx, { organizationId, organizationName: user.email, projectId: newId('proj'), projectName: isDefault ? 'Default project' : 'My project', isDefault, now });
  await insertMembership(tx, { userId: user.id, organizationId, role: 'owner', now });
}

/**
 * The installation's default project, where `keys create` without --project puts a key: the
 * first account's home project once someone signed in (marked default now if it was not yet),
 * else a new unowned "Default project" that the first account to sign in will own.
 */
export async function installationDefaultProject(em: Em, now: Date): Promise<ProjectRow> {
  return em.transactional(async (tx) => {
    await lockDefaultProjectOwnership(tx);
    const existing = await findDefaultProject(tx);
    if (existing) return existing;
    const first = await firstUser(tx);
    if (first) {
      const home = await findProjectOrFail(tx, (await homeProjectOf(tx, first.id)).id);
      await markProjectDefault(tx, home);
      return home;
    }
    const organizationId = newId('org');
    const project = addOrganizationWithProject(tx, { organizationId, organizationName: 'Default project', projectId: newId('proj'), projectName: 'Default project', isDefault: true, now });
    await tx.flush();
    return project;
  });
}

/** The projects of every organization the member belongs to, oldest first (the dashboard's project switcher). */
async function memberProjects(em: Em, userId: string): Promise<ProjectRow[]> {
  return listProjectsOfOrganizations(em, await organizationsOf(em, userId));
}

/** Resolves a session cookie to the signed-in member; anything wrong is 401 INVALID_SESSION. */
export async function authenticateSession(em: Em, token: string, now: Date, select: { mode?: string; projectId?: string }): Promise<AuthContext> {
  if (token.length < 20 || token.length > 200) throw new ApiError('INVALID_SESSION');
  const session = await findUserSessionByTokenHash(em, sha256(token));
  if (!session || session.revokedAt || session.expiresAt <= now) throw new ApiError('INVALID_SESSION');
  if (select.mode !== undefined && select.mode !== 'test' && select.mode !== 'live') {
    throw new ApiError('VALIDATION_FAILED', 'The Svc-Mode header must be test or live.');
  }
  const mode = select.mode === 'live' ? 'live' : 'test';
  let projectId: string;
  if (select.projectId) {
    const project = await findProject(em, select.projectId);
    const member = project ? await findMembership(em, session.userId, project.organizationId) : null;
    if (!project || !member) throw new ApiError('NOT_FOUND', 'No such project among the signed-in member\'s.');
    projectId = project.id;
  } else {
    projectId = (await homeProjectOf(em, session.userId)).id;
  }
  return { via: 'session', keyId: null, userId: session.userId, sessionId: session.id, projectId, mode, livemode: mode === 'live', scopes: [...SCOPES] };
}

/** POST /v1/auth/logout: the session ends now. */
export async function endSession(ctx: Ctx & { auth: AuthContext }): Promise<void> {
  if (!ctx.auth.sessionId) return;
  const session = await findUserSession(ctx.em, ctx.auth.sessionId);
  if (session && !session.revokedAt) await markUserSessionRevoked(ctx.em, session, ctx.services.now());
}

/** POST /v1/auth/cli/start: a device code (only its hash is stored) and a user code to confirm. */
export async function startDeviceSignIn(ctx: Ctx, ip: string, baseUrl: string) {
  const now = ctx.services.now();
  await consumeRateLimit(ctx.em, `device:ip:${ip}`, STARTS_PER_IP, now, {
    windowSeconds: SIGN_IN_WINDOW_SECONDS,
    human: (retryAfter) => `Device sign-ins are limited to ${STARTS_PER_IP} per address per 15 minutes; retry in ${retryAfter} s.`,
  });
  const deviceCode = randomToken(32);
  // A pending user code is unique (partial index); on the rare collision, draw again.
  for (let attempt = 0; ; attempt++) {
    const userCode = newUserCode();
    const taken = await findPendingDeviceByUserCode(ctx.em, userCode);
    if (taken && attempt < 5) continue;
    await insertDeviceCode(ctx.em, {
      id: newId('dvc'),
      deviceCodeHash: sha256(deviceCode),
      userCode,
      intervalSeconds: DEVICE_INTERVAL_SECONDS,
      expiresAt: new Date(now.getTime() + DEVICE_TTL_SECONDS * 1000),
      now,
    });
    // No verification_url_complete: the page never takes the code from its address (the person types it).
    return {
      device_code: deviceCode,
      user_code: userCode,
      verification_url: `${baseUrl}/dashboard/device`,
      interval: DEVICE_INTERVAL_SECONDS,
      expires_in: DEVICE_TTL_SECONDS,
    };
  }
}

/**
 * POST /v1/auth/cli/poll (RFC 8628 section 3.5): pending, or ready with a new test key exactly
 * once (minted in the transaction that marks the code delivered; the secret exists only in
 * this response). Faster than the interval: the interval grows by 5 s, committed, then 429.
 */
export async function pollDeviceSignIn(ctx: Ctx, deviceCode: string): Promise<CliPollResult> {
  const now = ctx.services.now();
  const outcome = await ctx.em.transactional(async (tx) => {
    const dc = await findDeviceForUpdate(tx, sha256(deviceCode));
    if (!dc || dc.status === 'delivered' || dc.expiresAt <= now) return { kind: 'gone' as const };
    const tooSoon = dc.lastPolledAt && now.getTime() - dc.lastPolledAt.getTime() < dc.intervalSeconds * 1000;
    if (tooSoon) {
      await markDevicePolled(tx, dc, { lastPolledAt: now, intervalSeconds: dc.intervalSeconds + 5 });
      return { kind: 'slow_down' as const, interval: dc.intervalSeconds };
    }
    if (dc.status === 'pending') {
      await markDevicePolled(tx, dc, { lastPolledAt: now });
      return { kind: 'result' as const, result: { status: 'pending' as const } };
    }
    const { key, secret } = await createApiKey(tx, { projectId: dc.projectId!, mode: 'test', name: 'CLI login', now });
    await markDeviceDelivered(tx, dc, { lastPolledAt: now, keyId: key.id });
    return { kind: 'result' as const, result: { status: 'ready' as const, api_key: { ...presentKey(key), secret } } };
  });
  if (outcome.kind === 'gone') throw new ApiError('DEVICE_CODE_EXPIRED');
  if (outcome.kind === 'slow_down') {
    throw new ApiError('SLOW_DOWN', `Poll at most every ${outcome.interval} s.`, { headers: { 'Retry-After': String(outcome.interval) } });
  }
  return outcome.result;
}

/** POST /v1/auth/cli/approve: the signed-in member approves the device showing the code they typed on the device page. */
export async function approveDevice(ctx: Ctx & { auth: AuthContext }, rawCode: string): Promise<void> {
  const code = normalizeUserCode(rawCode);
  if (!code || !ctx.auth.userId) throw new ApiError('DEVICE_CODE_EXPIRED');
  const now = ctx.services.now();
  await ctx.em.transactional(async (tx) => {
    const dc = await findPendingDeviceByUserCode(tx, code, true);
    if (!dc || dc.expiresAt <= now) throw new ApiError('DEVICE_CODE_EXPIRED');
    await markDeviceApproved(tx, dc, { userId: ctx.auth.userId, projectId: ctx.auth.projectId });
  });
}

/** GET /v1/me: the calling key (or signed-in member), its project and mode. */
export async function describeKey(em: Em, auth: AuthContext) {
  const key = auth.keyId ? await findKeyByIdOrFail(em, auth.keyId) : null;
  const user = auth.userId ? await findUserOrFail(em, auth.userId) : null;
  const project = await findProjectOrFail(em, auth.projectId);
  const projects = user ? await memberProjects(em, user.id) : [project];
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
    projects: projects.map((p) => ({ id: p.id, name: p.name, organization_id: p.organizationId, is_default: p.isDefault })),
    livemode: auth.livemode,
  };
}
