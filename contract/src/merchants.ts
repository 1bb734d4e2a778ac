import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, listEnvelope, ListQuery, meta, idRef, prefixedId, publicErrors, serviceValidated } from './common.js';
import { ChainName } from './chains.js';
import { ErrorBody } from './errors.js';

export const RailName = z.enum(['x402', 'card', 'mock']);
export type RailName = z.infer<typeof RailName>;

/**
 * Receiving as a merchant sends it (interface 2.3), field by field: the type the SDKs compile
 * against. `asset` defaults to USDC; the server upper-cases it.
 */
export const ReceivingConfig = z
  .object({
    x402: z
      .object({
        chain: ChainName,
        address: z.string().describe('20-byte 0x-prefixed hex address; returned EIP-55 checksummed.'),
        asset: z.enum(['USDC', 'usdc']).optional().describe('Default USDC.'),
      })
      .strict()
      .optional(),
    card: z.object({ processor: z.string(), accountId: z.string() }).strict().optional(),
    mock: z.object({ account: z.string() }).strict().optional().describe('Test mode only.'),
  })
  .strict()
  .describe('Object keyed by rail; at least one rail.');
export type ReceivingConfig = z.infer<typeof ReceivingConfig>;

/**
 * Receiving on the wire: any object reaches the server's validator, which answers the precise
 * RECEIVING_* code of section 7.3 instead of a generic VALIDATION_FAILED (serviceValidated).
 */
export const ReceivingInput = serviceValidated(ReceivingConfig, z.record(z.string(), z.unknown()));

export const X402Receiving = z.object({
  chain: ChainName,
  address: z.string().describe('EIP-55 checksummed address'),
  asset: z.literal('USDC'),
});
export const CardReceiving = z.object({ processor: z.string(), accountId: z.string() });
export const MockReceiving = z.object({ account: z.string() });
export const Receiving = z.object({
  x402: X402Receiving.optional(),
  card: CardReceiving.optional(),
  mock: MockReceiving.optional(),
});
export type Receiving = z.infer<typeof Receiving>;

export const Slug = z
  .string()
  .regex(/^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/, 'must be 1-63 lower-case letters, digits or hyphens, not starting or ending with a hyphen');
export const Domain = z
  .string()
  .max(253)
  .regex(/^(?=.{1,253}$)(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63}$|^localhost$/, 'must be a host name such as shop.example.com')
  .transform((d) => d.toLowerCase());
const Rails = z
  .array(RailName)
  .min(1)
  .refine((r) => new Set(r).size === r.length, 'must not repeat a rail');
const JwksUrl = z.string().url().refine((u) => /^https?:\/\//.test(u), 'must be an http(s) URL');
/** At most 5 issuers: each may be fetched while a mandate is checked. */
const Ap2Issuers = z
  .array(JwksUrl)
  .max(5)
  .refine((urls) => new Set(urls).size === urls.length, 'must list each URL at most once')
  .describe('JWKS URLs of the AP2 mandate issuers this merchant trusts (docs/decisions.md "AP2 mandates"); [] accepts no ap2 mandate.');

export const PublicJwk = z.object({
  kty: z.literal('OKP'),
  crv: z.literal('Ed25519'),
  x: z.string(),
  kid: z.string(),
  alg: z.literal('EdDSA').optional(),
  use: z.literal('sig').optional(),
});
export const Jwks = z.object({ keys: z.array(PublicJwk) });

export const DomainStatus = z
  .enum(['unverified', 'verified'])
  .describe('verified: the owner proved control of `domain` (POST /v1/merchants/{id}/domain/verify) and agents reach the merchant at it; unverified: it is not served.');
export type DomainStatus = z.infer<typeof DomainStatus>;

/** How the owner proves control of its domain: either proof is enough. */
export const DomainVerification = z
  .object({
    token: z.string().describe('This merchant\'s verification token (not a secret: it is published in DNS or on the site).'),
    dns_txt: z
      .object({
        name: z.string().describe('`_svc-checkout.<domain>`'),
        value: z.string().describe('`svc-verify=<token>`'),
      })
      .describe('A DNS TXT record to publish.'),
    https_file: z
      .object({
        url: z.string().describe('`https://<domain>/.well-known/svc-checkout-verification.txt`'),
        content: z.string().describe('A line of the file: `svc-verify=<token>`.'),
      })
      .describe('Or a file to serve over https (answered 200 without a redirect).'),
    verified_at: IsoTimestamp.nullable().describe('When control of the current domain was proven; null while unverified.'),
  })
  .describe('Publish either proof, then POST /v1/merchants/{id}/domain/verify.');
export type DomainVerification = z.infer<typeof DomainVerification>;

export const Merchant = z.object({
  id: prefixedId('mrch'),
  slug: z.string().describe('Belongs to the project: its test and live merchants may share it, no other project may use it.'),
  name: z.string(),
  domain: z.string(),
  domain_status: DomainStatus,
  domain_verification: DomainVerification,
  receiving: Receiving,
  rails: z.array(RailName),
  receipt_kid: z.string(),
  receipt_pub_jwk: PublicJwk,
  trusted_svc_jwks_url: z.string().nullable(),
  trusted_ap2_issuers: z.array(z.string()).describe('JWKS URLs of the AP2 mandate issuers (trusted surfaces, credential providers) this merchant trusts.'),
  livemode: z.boolean(),
  is_default: z.boolean().describe('The first merchant of a project in a mode is its default.'),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
});
export type Merchant = z.infer<typeof Merchant>;

export const CreateMerchantBody = z
  .object({
    slug: Slug,
    name: z.string().trim().min(1).max(200),
    domain: Domain,
    receiving: ReceivingInput,
    rails: Rails.optional().describe('Default ["x402","mock"] (["x402"] on live merchants).'),
    trusted_svc_jwks_url: JwksUrl.nullable().optional(),
    trusted_ap2_issuers: Ap2Issuers.optional(),
  })
  .strict();
export type CreateMerchantBody = z.infer<typeof CreateMerchantBody>;

export const UpdateMerchantBody = z
  .object({
    name: z.string().trim().min(1).max(200).optional(),
    domain: Domain.optional(),
    receiving: ReceivingInput.optional(),
    rails: Rails.optional(),
    trusted_svc_jwks_url: JwksUrl.nullable().optional(),
    trusted_ap2_issuers: Ap2Issuers.optional(),
  })
  .strict();
export type UpdateMerchantBody = z.infer<typeof UpdateMerchantBody>;

const MerchantIdParams = z.object({ id: idRef('mrch') });

const merchantRoutes = c.router({
  create: {
    method: 'POST',
    path: '',
    body: CreateMerchantBody,
    responses: { 201: Merchant, 409: ErrorBody },
    summary: 'Create a merchant',
    description:
      'Creates a merchant in the key\'s mode and mints its Ed25519 receipt key. The first merchant of a project in a mode becomes its default. A slug belongs to one project: 409 MERCHANT_SLUG_TAKEN when this mode already has a merchant with it or another project uses it (in either mode). The domain starts unverified (see POST /v1/merchants/{id}/domain/verify).',
    metadata: meta({ auth: 'key', scopes: ['merchants:write'], tag: 'Merchants', operationId: 'createMerchant' }),
  },
  list: {
    method: 'GET',
    path: '',
    query: ListQuery(20),
    responses: { 200: listEnvelope(Merchant) },
    summary: 'List merchants, newest first',
    metadata: meta({ auth: 'key', scopes: ['merchants:read'], tag: 'Merchants', operationId: 'listMerchants' }),
  },
  get: {
    method: 'GET',
    path: '/:id',
    pathParams: MerchantIdParams,
    responses: { 200: Merchant },
    summary: 'Retrieve a merchant',
    metadata: meta({ auth: 'key', scopes: ['merchants:read'], tag: 'Merchants', operationId: 'getMerchant' }),
  },
  update: {
    method: 'PATCH',
    path: '/:id',
    pathParams: MerchantIdParams,
    body: UpdateMerchantBody,
    responses: { 200: Merchant },
    summary: 'Update a merchant',
    description: 'Only present fields change. slug, livemode and the receipt key cannot be changed. A new `domain` is unverified until verified again.',
    metadata: meta({ auth: 'key', scopes: ['merchants:write'], tag: 'Merchants', operationId: 'updateMerchant' }),
  },
  verifyDomain: {
    method: 'POST',
    path: '/:id/domain/verify',
    pathParams: MerchantIdParams,
    body: c.noBody(),
    responses: { 200: Merchant, 409: ErrorBody, 422: ErrorBody },
    summary: 'Verify the merchant\'s domain',
    description:
      'Looks for this merchant\'s proof (`domain_verification`): the DNS TXT record, else the https file (fetched through the outbound URL guard, 5 s, no redirects). Found: `domain_status` becomes `verified` and agents reach the merchant at its domain. 422 DOMAIN_VERIFICATION_FAILED when neither proof is found; 409 MERCHANT_DOMAIN_TAKEN when another project verified that domain first. Already verified: answers the merchant as it is.',
    metadata: meta({ auth: 'key', scopes: ['merchants:write'], tag: 'Merchants', operationId: 'verifyMerchantDomain' }),
  },
}, { pathPrefix: '/v1/merchants', commonResponses: keyErrors });

/** Public: whoever holds a receipt reads the key set that signed it, by the merchant's id, without a key. */
const merchantPublicRoutes = c.router({
  jwks: {
    method: 'GET',
    path: '/:id/jwks',
    pathParams: MerchantIdParams,
    responses: { 200: Jwks },
    summary: 'The merchant\'s receipt public key set',
    description: 'Public, resolved by id in either mode. Cache-Control: public, max-age=300.',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Merchants', operationId: 'getMerchantJwks' }),
  },
}, { pathPrefix: '/v1/merchants', commonResponses: publicErrors });

export const merchantsContract = { ...merchantRoutes, ...merchantPublicRoutes };
