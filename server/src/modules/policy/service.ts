import { MerchantPolicy, newAgentPolicyWarnings, resolvePolicy, type Finding, type RailName, type ValidationFinding } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type Ctx } from '../../http/context.js';
import { canonicalHash } from '../../lib/canonical-json.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import { listCatalogItems } from '../catalog/index.js';
import {
  bumpConfigVersion,
  checkReceiving,
  effectiveRails,
  lockMerchantForUpdate,
  lockMerchantRow,
  markMerchantPublished,
  resolveMerchant,
  type MerchantRow,
} from '../merchants/index.js';
import {
  activatePolicyVersion,
  findActivePolicyVersion,
  findNewestPolicyVersion,
  findPolicyVersion,
  insertPolicyVersion,
  listPolicyVersionRows,
  nextPolicyVersion,
  type PolicyVersionRow,
} from './store.js';

/** Currencies each rail can settle: USDC rails (and the mock that mirrors them) take USD only. */
const RAIL_CURRENCIES: Record<RailName, (currency: string) => boolean> = {
  x402: (c) => c === 'USD',
  mock: (c) => c === 'USD',
  card: () => true,
};
export const railSettles = (rail: RailName, currency: string) => RAIL_CURRENCIES[rail](currency);

/**
 * Policy hash: sha256 hex of the RFC 8785 canonical JSON of the normalized body, i.e. with
 * every default applied, so two bodies that behave the same hash the same. A body that is
 * not a valid MerchantPolicy (it can be stored, but not published) hashes as sent.
 */
export function policyHash(body: Record<string, unknown>): string {
  const parsed = MerchantPolicy.safeParse(body);
  return canonicalHash(parsed.success ? resolvePolicy(parsed.data) : body);
}

export async function activePolicy(em: Em, merchantId: string): Promise<PolicyVersionRow | null> {
  return findActivePolicyVersion(em, merchantId);
}

export async function getPolicy(em: Em, auth: AuthContext, merchantId?: string) {
  const m = await resolveMerchant(em, auth, merchantId);
  const p = await activePolicy(em, m.id);
  if (!p) return { active: null, version: 0 as const, body: null, hash: null };
  return {
    id: p.id,
    version: p.version,
    body: p.body,
    hash: p.hash,
    active: true as const,
    note: p.note ?? null,
    created_at: p.createdAt.toISOString(),
  };
}

/**
 * GET /v1/policy/versions: every stored version of the merchant, highest first, as put (so a
 * client can diff two). The cursor is the id of the last version of the previous page.
 */
export async function listPolicyVersions(em: Em, auth: AuthContext, q: { limit: number; cursor?: string; merchant_id?: string }) {
  const m = await resolveMerchant(em, auth, q.merchant_id);
  let belowVersion: number | undefined;
  if (q.cursor !== undefined) {
    const at = hasPrefix(q.cursor, 'pol') ? await findPolicyVersion(em, m.id, q.cursor) : null;
    if (!at) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
    belowVersion = at.version;
  }
  const rows = await listPolicyVersionRows(em, m.id, { limit: q.limit + 1, belowVersion });
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return {
    data: page.map((p) => ({
      id: p.id,
      version: p.version,
      hash: p.hash,
      active: p.active,
      body: p.body,
      note: p.note ?? null,
      created_at: p.createdAt.toISOString(),
    })),
    has_more: hasMore,
    next_cursor: hasMore ? page.at(-1)!.id : null,
  };
}

export async function putPolicy(ctx: Ctx & { auth: AuthContext }, merchantId: string | undefined, body: Record<string, unknown>, note?: string) {
  return ctx.em.transactional(async (tx) => {
    const m = await resolveMerchant(tx, ctx.auth, merchantId);
    await lockMerchantForUpdate(tx, m.id);
    const version = await nextPolicyVersion(tx, m.id);
    const p = await insertPolicyVersion(tx, {
      id: newId('pol'),
      merchantId: m.id,
      version,
      body,
      hash: policyHash(body),
      active: false,
      note: note ?? null,
      createdAt: ctx.services.now(),
    });
    return respondIn(ctx, tx, 201, { id: p.id, version: p.version, hash: p.hash, active: false as const });
  });
}

function policyFindings(body: Record<string, unknown>, rails: RailName[]): Finding[] {
  const findings: Finding[] = [];
  const parsed = MerchantPolicy.safeParse(body);
  if (!parsed.success) {
    for (const issue of parsed.error.issues) {
      if (issue.code === 'unrecognized_keys') {
        for (const k of issue.keys) findings.push({ code: 'POLICY_FIELD_UNKNOWN', human: `policy.${k}: is not a MerchantPolicy field.` });
      } else {
        findings.push({ code: 'POLICY_FIELD_INVALID', human: `policy.${issue.path.join('.')}: ${issue.message}.` });
      }
    }
    return findings;
  }
  const allowed = parsed.data.allowedRails;
  if (allowed && rails.length > 0 && !rails.some((r) => allowed.includes(r))) {
    findings.push({ code: 'POLICY_RAILS_UNSATISFIABLE', human: `policy.allowedRails: allows none of the merchant's rails (${rails.join(', ')}).` });
  }
  return findings;
}

/** Validates the draft: merchant + receiving + catalog + newest policy version. No side effects. */
export async function validateDraft(em: Em, m: MerchantRow): Promise<{ findings: Finding[]; newest: PolicyVersionRow | null }> {
  const findings: Finding[] = [];
  const receivingCheck = checkReceiving(m.receiving, m.livemode);
  findings.push(...receivingCheck.findings.map((f) => ({ code: f.code, human: f.human })));
  const rails = effectiveRails(m.rails, receivingCheck.receiving).filter((r) => !(m.livemode && r === 'mock'));
  if (rails.length === 0 && !findings.some((f) => f.code === 'RECEIVING_NO_RAIL_ENABLED')) {
    findings.push({ code: 'RECEIVING_NO_RAIL_ENABLED', human: `No rail is both enabled (rails: ${m.rails.join(', ')}) and configured in receiving.` });
  }
  const newest = await findNewestPolicyVersion(em, m.id);
  if (newest) findings.push(...policyFindings(newest.body, rails));
  const items = await listCatalogItems(em, m.id, true);
  const currencies = [...new Set(items.map((i) => i.currency))];
  for (const currency of currencies) {
    if (!rails.some((r) => railSettles(r, currency))) {
      const skus = items.filter((i) => i.currency === currency).map((i) => i.sku);
      findings.push({
        code: 'CATALOG_CURRENCY_UNSETTLEABLE',
        human: `catalog: ${skus.slice(0, 5).join(', ')}${skus.length > 5 ? '…' : ''} priced in ${currency}, which no configured rail (${rails.join(', ') || 'none'}) can settle.`,
      });
    }
  }
  return { findings, newest };
}

const asError = (f: Finding): ValidationFinding => ({ ...f, severity: 'error' });

/**
 * POST /v1/validate: the draft's errors (publish refuses them) and warnings (publishable: a
 * policy that turns away every agent without a mandate or history, issue 29).
 */
export async function validateConfig(em: Em, auth: AuthContext, merchantId?: string): Promise<{ ok: boolean; findings: ValidationFinding[] }> {
  const m = await resolveMerchant(em, auth, merchantId);
  const { findings, newest } = await validateDraft(em, m);
  const parsed = newest ? MerchantPolicy.safeParse(newest.body) : null;
  const warnings = parsed?.success ? newAgentPolicyWarnings(parsed.data) : [];
  return {
    ok: findings.length === 0,
    findings: [...findings.map(asError), ...warnings.map((f) => ({ ...f, severity: 'warning' as const }))],
  };
}

/** Validate, then in one transaction deactivate the active version, activate the newest, bump the manifest version. */
export async function publishConfig(ctx: Ctx & { auth: AuthContext }, merchantId?: string) {
  return ctx.em.transactional(async (tx) => {
    // Locked and re-read: a receiving or rails change committed while we waited is what gets validated.
    const m = await lockMerchantRow(tx, await resolveMerchant(tx, ctx.auth, merchantId));
    const { findings, newest } = await validateDraft(tx, m);
    if (findings.length > 0) {
      throw new ApiError('CONFIG_INVALID', `Publish refused: ${findings.length} finding(s) (${[...new Set(findings.map((f) => f.code))].join(', ')}); first: ${findings[0]!.human}`, {
        extra: { published: false, ok: false, findings: findings.map(asError) },
      });
    }
    const now = ctx.services.now();
    if (newest && !newest.active) await activatePolicyVersion(tx, m.id, newest.id, now);
    await markMerchantPublished(tx, m.id, now);
    await bumpConfigVersion(ctx, tx, m.id, now);
    return respondIn(ctx, tx, 200, { published: true as const, ok: true as const, active_policy_version: newest?.version ?? 0 });
  });
}

