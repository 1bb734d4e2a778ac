import { createHash } from 'node:crypto';
import { resolvePolicy, type Manifest } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { effectiveRails, findPublishedMerchantBySlug, findPublishedMerchantIdByDomain, loadMerchantById, type MerchantRow } from '../merchants/index.js';
import { listCatalogItems } from '../catalog/index.js';
import { activePolicy } from '../policy/index.js';
import { agentRails } from '../checkout/index.js';
import type { CachedManifest, MerchantSnapshot } from './cache.js';

const notFound = () => new ApiError('NOT_FOUND', 'No such merchant, or it has not published yet.');

/**
 * `/m/<ref>`: an `mrch_` id names that merchant; a slug names the project's published live
 * merchant with it when there is one, else its published test merchant (a slug belongs to one
 * project: merchant_slugs). Unpublished merchants are invisible to agents.
 */
export async function merchantByRef(em: Em, ref: string): Promise<MerchantRow> {
  let m: MerchantRow | null;
  if (hasPrefix(ref, 'mrch')) {
    m = await loadMerchantById(em, ref);
  } else {
    // Only published merchants count: an unpublished live merchant must not hide the published test one.
    m = await findPublishedMerchantBySlug(em, ref.toLowerCase());
  }
  if (!m || !m.publishedAt) throw notFound();
  return m;
}

/**
 * The published merchant whose verified storefront domain is `host` (live preferred), or null.
 * A domain is verified by one project only (merchant_domains), and an unverified one is never
 * served: claiming a domain proves nothing until its owner has shown control of it.
 */
export async function merchantRefByDomain(em: Em, host: string): Promise<string | null> {
  return findPublishedMerchantIdByDomain(em, host.toLowerCase());
}

/**
 * The manifest of a published merchant as seen under `prefix`, and its ETag (the hash of
 * the exact bytes res.json sends). Cached by the caller (AgentReadCache).
 */
export async function buildManifest(em: Em, m: MerchantSnapshot, prefix: string): Promise<CachedManifest> {
  const policyRow = await activePolicy(em, m.id);
  const policy = resolvePolicy(policyRow?.body);
  const rails = agentRails(m, policy.allowedRails);
  const payTo: Manifest['pay_to'] = {};
  // Keys in contract order so the served bytes are exactly the bytes the ETag hashes.
  const x = m.receiving.x402;
  if (rails.includes('x402') && x) payTo.x402 = { chain: x.chain, address: x.address, asset: x.asset };
  if (rails.includes('mock') && m.receiving.mock) payTo.mock = { account: m.receiving.mock.account };
  if (rails.includes('card') && m.receiving.card) payTo.card = { processor: m.receiving.card.processor };
  const manifest: Manifest = {
    protocol: 'svc-checkout/0.1',
    merchant: { id: m.id, name: m.name, domain: m.domain, domain_verified: m.verifiedDomain === m.domain },
    livemode: m.livemode,
    catalog_url: `${prefix}/agent/catalog`,
    checkout_url: `${prefix}/agent/checkout`,
    jwks_url: `${prefix}/.well-known/jwks.json`,
    mcp_url: `${prefix}/mcp`,
    rails,
    pay_to: payTo,
    // only the types the gate verifies: acp cannot be (docs/decisions.md "AP2 mandates")
    mandate: { accepted: ['svc', 'ap2', 'none'], preferred: 'svc' },
    policy_summary: {
      require_mandate_over_usd: policy.requireMandateOverUsd,
      max_per_transaction_usd: policy.maxPerTransactionUsd,
      min_reputation_tier: policy.minReputationTier,
    },
  };
  // Each item any x402 client can buy: GET <prefix>/x402/<sku> answers 402 with the requirements.
  if (payTo.x402) {
    const items = (await listCatalogItems(em, m.id, true)).filter((i) => i.currency === 'USD');
    manifest.paid_resources = items.map((i) => ({
      sku: i.sku,
      name: i.name,
      url: `${prefix}/x402/${encodeURIComponent(i.sku)}`,
      price: { amount: i.priceAmount, currency: i.currency },
    }));
  }
  const bytes = JSON.stringify(manifest);
  return { body: manifest, etag: `"${createHash('sha256').update(bytes).digest('hex').slice(0, 32)}"` };
}

/** If-None-Match matching per RFC 9110 (list, weak validators, `*`). */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}
