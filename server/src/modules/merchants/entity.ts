import { defineEntity, p } from '@mikro-orm/core';
import type { RailName, Receiving } from '@svc/contract';

export const MerchantEntity = defineEntity({
  name: 'Merchant',
  tableName: 'merchants',
  properties: {
    id: p.string().primary(),
    projectId: p.string(),
    livemode: p.boolean(),
    slug: p.string(),
    name: p.string(),
    domain: p.string(),
    /** What the owner publishes (DNS TXT or a well-known file) to prove control of `domain`; not a secret. */
    domainToken: p.string(),
    /** `domain` once its control was proven (FK to merchant_domains: one project per domain); null while unverified. */
    verifiedDomain: p.string().nullable(),
    domainVerifiedAt: p.datetime().columnType('timestamptz').nullable(),
    receiving: p.json<Receiving>(),
    rails: p.json<RailName[]>(),
    receiptKid: p.string(),
    receiptPublicX: p.string(),
    /** AES-256-GCM sealed Ed25519 seed, bound to the merchant id; never leaves the server. */
    receiptSeedSealed: p.string().hidden(),
    trustedSvcJwksUrl: p.string().nullable(),
    /** JWKS URLs of the AP2 mandate issuers the merchant trusts (gate/ap2.ts); [] accepts none. */
    trustedAp2Issuers: p.json<string[]>().fieldName('trusted_ap2_issuers'),
    isDefault: p.boolean().default(false),
    /** Bumped by every catalog, receiving and publish write; the manifest cache keys on it. */
    configVersion: p.integer().default(1),
    publishedAt: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    updatedAt: p.datetime().columnType('timestamptz'),
  },
});
