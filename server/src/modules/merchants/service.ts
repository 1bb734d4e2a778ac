import { randomBytes } from 'node:crypto';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { CreateMerchantBody, Merchant, RailName, UpdateMerchantBody } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type Ctx } from '../../http/context.js';
import { generateEd25519 } from '../../lib/crypto.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { fromBaseUnits } from '../../lib/money.js';
import { checkOutboundUrl, outboundRules, type OutboundRules } from '../../lib/ssrf.js';
import { checkReceiving, type ReceivingFinding } from './receiving.js';
import { domainProven, domainVerificationOf } from './domain.js';
import {
  claimDomain,
  claimSlug,
  countDefaultMerchants,
  findDefaultMerchant,
  findMerchantById,
  findProjectMerchant,
  incrementConfigVersion,
  insertMerchant,
  listProjectMerchants,
  lockMerchantRowById,
  updateMerchantRow,
  type MerchantRow,
} from './store.js';

export const receiptKidFor = (merchantId: string) => `${merchantId}-receipts-v1`;

export function publicJwk(m: Pick<MerchantRow, 'receiptKid' | 'receiptPublicX'>) {
  return { kty: 'OKP' as const, crv: 'Ed25519' as const, x: m.receiptPublicX, kid: m.receiptKid, alg: 'EdDSA' as const, use: 'sig' as const };
}

/** True once the owner proved control of the merchant's current domain (the row's check constraint keeps verified_domain = domain). */
export function domainVerified(m: Pick<MerchantRow, 'domain' | 'verifiedDomain'>): boolean {
  return m.verifiedDomain !== null && m.verifiedDomain === m.domain;
}

export function presentMerchant(m: MerchantRow): Merchant {
  return {
    id: m.id,
    slug: m.slug,
    name: m.name,
    domain: m.domain,
    domain_status: domainVerified(m) ? 'verified' : 'unverified',
    domain_verification: domainVerificationOf(m.domain, m.domainToken, domainVerified(m) ? m.domainVerifiedAt! : null),
    receiving: m.receiving,
    rails: m.rails,
    receipt_kid: m.receiptKid,
    receipt_pub_jwk: publicJwk(m),
    trusted_svc_jwks_url: m.trustedSvcJwksUrl ?? null,
    trusted_ap2_issuers: m.trustedAp2Issuers ?? [],
    livemode: m.livemode,
    is_default: m.isDefault,
    created_at: m.createdAt.toISOString(),
    updated_at: m.updatedAt.toISOString(),
  };
}

/** One 400 naming every failing receiving rule: all their codes, one line of text. */
function throwFindings(findings: ReceivingFinding[]): void {
  if (findings.length === 0) return;
  const codes = [...new Set(findings.map((f) => f.code))];
  throw new ApiError(codes, findings.map((f) => f.human.replace(/\.$/, '')).join('; ') + '.');
}

/** Validates receiving (and the rails list, when given) and throws every finding at once. */
export function normalizeReceiving(input: unknown, livemode: boolean, rails?: RailName[]) {
  const { receiving, findings } = checkReceiving(input, livemode);
  if (rails) findings.push(...railFindings(rails, livemode));
  throwFindings(findings);
  return receiving;
}

function railFindings(rails: RailName[], livemode: boolean): ReceivingFinding[] {
  return livemode && rails.includes('mock') ? [{ code: 'RECEIVING_MOCK_IN_LIVE', human: 'rails: the mock rail cannot be enabled on a live merchant.' }] : [];
}

/** The trusted issuer JWKS URL follows the webhook URL rules (lib/ssrf.ts `outboundRules`): https to a public host under the live rules. */
function checkJwksUrl(raw: string | null | undefined, rules: OutboundRules, field = 'trusted_svc_jwks_url'): string | null | undefined {
  if (raw == null) return raw;
  const checked = checkOutboundUrl(raw, rules);
  if (!checked.ok) throw new ApiError('VALIDATION_FAILED', `${field}: ${checked.why}.`);
  return checked.href;
}

/** The AP2 issuers' JWKS URLs, each under the same rules as the svc issuer's. */
function checkAp2Issuers(raw: string[] | undefined, rules: OutboundRules): string[] | undefined {
  return raw?.map((url, i) => checkJwksUrl(url, rules, `trusted_ap2_issuers[${i}]`)!);
}

export async function createMerchant(ctx: Ctx & { auth: AuthContext }, body: CreateMerchantBody): Promise<MerchantRow> {
  const { livemode, projectId } = ctx.auth;
  const rails: RailName[] = body.rails ?? (livemode ? ['x402'] : ['x402', 'mock']);
  const receiving = normalizeReceiving(body.receiving, livemode, rails);
  const jwksUrl = checkJwksUrl(body.trusted_svc_jwks_url, outboundRules(ctx.services.config, livemode));
  const ap2Issuers = checkAp2Issuers(body.trusted_ap2_issuers, outboundRules(ctx.services.config, livemode)) ?? [];
  const id = newId('mrch');
  const seed = generateEd25519();
  try {
    return await ctx.em.transactional(async (tx) => {
      const now = ctx.services.now();
      // A slug belongs to one project in both modes (merchant_slugs; the merchant row references the claim).
      if (!(await claimSlug(tx, body.slug, projectId, now))) {
        throw new ApiError('MERCHANT_SLUG_TAKEN', `The slug ${body.slug} belongs to another project.`);
      }
      // The partial unique index merchants_one_default keeps a single default even under races.
      const hasDefault = (await countDefaultMerchants(tx, projectId, livemode)) > 0;
      const m = await insertMerchant(tx, {
        id,
        projectId,
        livemode,
        slug: body.slug,
        name: body.name,
        domain: body.domain,
        domainToken: randomBytes(16).toString('hex'),
        verifiedDomain: null,
        domainVerifiedAt: null,
        receiving,
        rails,
        receiptKid: receiptKidFor(id),
        receiptPublicX: seed.x,
        receiptSeedSealed: ctx.services.box.seal(seed.d, id),
        trustedSvcJwksUrl: jwksUrl ?? null,
        trustedAp2Issuers: ap2Issuers,
        isDefault: !hasDefault,
        createdAt: now,
        updatedAt: now,
      });
      await respondIn(ctx, tx, 201, presentMerchant(m));
      return m;
    });
  } catch (err) {
    if (err instanceof UniqueConstraintViolationException && String(err.message).includes('merchants_slug_mode')) {
      throw new ApiError('MERCHANT_SLUG_TAKEN', `This project already has a ${livemode ? 'live' : 'test'} merchant with the slug ${body.slug}.`);
    }
    if (err instanceof UniqueConstraintViolationException && String(err.message).includes('merchants_one_default')) {
      // Lost the race to become the default: retry once as a non-default merchant.
      return createMerchant(ctx, body);
    }
    throw err;
  }
}

/** A merchant of the key's project and mode; anything else (other project, other mode, unknown) is 404. */
export async function findMerchant(em: Em, auth: AuthContext, id: string): Promise<MerchantRow> {
  if (!hasPrefix(id, 'mrch')) throw new ApiError('NOT_FOUND', 'No such merchant.');
  const m = await findProjectMerchant(em, { id, projectId: auth.projectId, livemode: auth.livemode });
  if (!m) throw new ApiError('NOT_FOUND', 'No such merchant.');
  return m;
}

/** `merchant_id` query or the project's default merchant in the key's mode. */
export async function resolveMerchant(em: Em, auth: AuthContext, merchantId?: string): Promise<MerchantRow> {
  if (merchantId !== undefined) return findMerchant(em, auth, merchantId);
  const m = await findDefaultMerchant(em, auth.projectId, auth.livemode);
  if (!m) throw new ApiError('NOT_FOUND', 'This project has no merchant in this mode yet; create one with POST /v1/merchants.');
  return m;
}

/**
 * Re-reads a resolved merchant with its row locked FOR UPDATE (inside a transaction), so a
 * read-modify-write or a publish sees the latest committed config and concurrent writers
 * of the same merchant serialize instead of overwriting each other's config_version.
 */
export async function lockMerchantRow(tx: Em, m: MerchantRow): Promise<MerchantRow> {
  return lockMerchantRowById(tx, m.id);
}

export async function listMerchants(em: Em, auth: AuthContext, limit: number, cursor?: string) {
  if (cursor && !hasPrefix(cursor, 'mrch')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const rows = await listProjectMerchants(em, { projectId: auth.projectId, livemode: auth.livemode, ...(cursor ? { beforeId: cursor } : {}), limit: limit + 1 });
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { data: page.map(presentMerchant), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

export async function updateMerchant(ctx: Ctx & { auth: AuthContext }, id: string, body: UpdateMerchantBody): Promise<MerchantRow> {
  return ctx.em.transactional(async (tx) => {
    const m = await lockMerchantRow(tx, await findMerchant(tx, ctx.auth, id));
    const changes: Partial<MerchantRow> = {};
    let configChanged = false;
    if (body.receiving !== undefined) {
      changes.receiving = normalizeReceiving(body.receiving, m.livemode, body.rails);
      configChanged = true;
    } else if (body.rails !== undefined) {
      throwFindings(railFindings(body.rails, m.livemode));
    }
    if (body.rails !== undefined) {
      changes.rails = body.rails;
      configChanged = true;
    }
    if (body.name !== undefined) {
      changes.name = body.name;
      configChanged = true;
    }
    if (body.domain !== undefined && body.domain !== m.domain) {
      // A new domain is unverified until its owner proves control of it (the claim on the old one is released by trigger).
      changes.domain = body.domain;
      changes.verifiedDomain = null;
      changes.domainVerifiedAt = null;
      configChanged = true;
    }
    if (body.trusted_svc_jwks_url !== undefined) changes.trustedSvcJwksUrl = checkJwksUrl(body.trusted_svc_jwks_url, outboundRules(ctx.services.config, m.livemode)) ?? null;
    if (body.trusted_ap2_issuers !== undefined) changes.trustedAp2Issuers = checkAp2Issuers(body.trusted_ap2_issuers, outboundRules(ctx.services.config, m.livemode));
    if (configChanged) changes.configVersion = m.configVersion + 1;
    ctx.services.caches.agent.invalidateOnCommit(tx, m.id);
    changes.updatedAt = ctx.services.now();
    await updateMerchantRow(tx, m, changes);
    return m;
  });
}

/**
 * POST /v1/merchants/{id}/domain/verify: looks for the owner's proof of control of the
 * domain (./domain.ts) outside any transaction, then records it and claims the domain for
 * the project (merchant_domains: the first project to verify a domain keeps it). Only a
 * verified domain is served to agents (http/agent-host.ts) and matches a mandate.
 */
export async function verifyMerchantDomain(ctx: Ctx & { auth: AuthContext }, id: string): Promise<MerchantRow> {
  const m = await findMerchant(ctx.em, ctx.auth, id);
  if (domainVerified(m)) return m;
  const { domain, domainToken } = m;
  const discovery = ctx.services.config.SVC_DISCOVERY_DOMAIN.toLowerCase();
  if (domain === discovery || domain.endsWith(`.${discovery}`)) {
    throw new ApiError('DOMAIN_VERIFICATION_FAILED', `${domain} is under the discovery domain ${discovery}, whose hosts this service names itself; use the merchant's own domain.`);
  }
  // The file fetch reaches what this merchant's webhooks may reach (lib/ssrf.ts outboundRules).
  if (!(await domainProven(ctx.services.domainProof, domain, domainToken, outboundRules(ctx.services.config, m.livemode)))) {
    const how = domainVerificationOf(domain, domainToken, null);
    throw new ApiError(
      'DOMAIN_VERIFICATION_FAILED',
      `No proof of control of ${domain} was found: no TXT record "${how.dns_txt.value}" at ${how.dns_txt.name}, and ${how.https_file.url} did not answer 200 with the line "${how.https_file.content}".`,
    );
  }
  return ctx.em.transactional(async (tx) => {
    const locked = await lockMerchantRow(tx, m);
    if (locked.domain !== domain) throw new ApiError('DOMAIN_VERIFICATION_FAILED', `The domain changed to ${locked.domain} while ${domain} was being verified; verify again.`);
    if (domainVerified(locked)) return locked;
    const now = ctx.services.now();
    if (!(await claimDomain(tx, domain, locked.projectId, now))) {
      throw new ApiError('MERCHANT_DOMAIN_TAKEN', `${domain} was verified by another project first.`);
    }
    ctx.services.caches.agent.invalidateOnCommit(tx, locked.id);
    await updateMerchantRow(tx, locked, { verifiedDomain: domain, domainVerifiedAt: now, configVersion: locked.configVersion + 1, updatedAt: now });
    await respondIn(ctx, tx, 200, presentMerchant(locked));
    return locked;
  });
}

/**
 * Every catalog and publish write calls this in its transaction: a new config_version, and
 * this process's agent cache dropped at commit (other processes hear the triggers' NOTIFY;
 * modules/agent/cache.ts).
 */
export async function bumpConfigVersion(ctx: Ctx, tx: Em, merchantId: string, now: Date): Promise<void> {
  await incrementConfigVersion(tx, merchantId, now);
  ctx.services.caches.agent.invalidateOnCommit(tx, merchantId);
}

export async function merchantJwks(em: Em, id: string) {
  if (!hasPrefix(id, 'mrch')) throw new ApiError('NOT_FOUND', 'No such merchant.');
  const m = await findMerchantById(em, id);
  if (!m) throw new ApiError('NOT_FOUND', 'No such merchant.');
  return { keys: [publicJwk(m)] };
}

export async function getReceiving(em: Em, auth: AuthContext, merchantId?: string) {
  const m = await resolveMerchant(em, auth, merchantId);
  return { receiving: m.receiving, rails: m.rails };
}

/** How long the overview's balance read waits for the chain node. */
export const RECEIVING_BALANCE_TIMEOUT_MS = 5000;

/**
 * GET /v1/receiving/balance: the USDC balance of the merchant's x402 receiving address, read on
 * chain through the live facilitator's node (balanceOf, rails/evm-reads.ts) after the merchant
 * row is read (no transaction is open while the chain is asked).
 */
export async function receivingBalance(ctx: Ctx & { auth: AuthContext }, merchantId?: string) {
  const m = await resolveMerchant(ctx.em, ctx.auth, merchantId);
  const x402 = m.receiving.x402;
  if (!ctx.auth.livemode || !x402) {
    throw new ApiError('RECEIVING_BALANCE_UNAVAILABLE', ctx.auth.livemode ? `Merchant ${m.id} does not receive USDC over x402.` : 'Test mode has no on-chain balance: x402 payments in test mode settle through the mock facilitator.');
  }
  const live = ctx.services.facilitators.live;
  if (!live.usdcBalanceOf) throw new ApiError('FACILITATOR_UNAVAILABLE', 'No live facilitator is configured (SVC_LIVE_FACILITATOR), so no chain node to read the balance from.');
  const read = await live.usdcBalanceOf(x402.address, RECEIVING_BALANCE_TIMEOUT_MS);
  const baseUnits = read.baseUnits.toString();
  return { chain: read.chain, address: x402.address, asset: 'USDC' as const, balance: fromBaseUnits(baseUnits), base_units: baseUnits, read_at: ctx.services.now().toISOString() };
}

export async function putReceiving(ctx: Ctx & { auth: AuthContext }, input: unknown, merchantId?: string) {
  return ctx.em.transactional(async (tx) => {
    const m = await lockMerchantRow(tx, await resolveMerchant(tx, ctx.auth, merchantId));
    const receiving = normalizeReceiving(input, m.livemode);
    ctx.services.caches.agent.invalidateOnCommit(tx, m.id);
    await updateMerchantRow(tx, m, { receiving, configVersion: m.configVersion + 1, updatedAt: ctx.services.now() });
    return respondIn(ctx, tx, 200, { receiving: m.receiving });
  });
}
