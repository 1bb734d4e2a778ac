import { z } from 'zod';
import { c, meta, publicErrors } from './common.js';
import { ErrorBody } from './errors.js';
import { CatalogItem } from './catalog.js';
import { ChainName } from './chains.js';
import { Jwks, RailName } from './merchants.js';
import { TrustTier } from './policy.js';
import { X402Challenge, X402RequestHeaders } from './x402.js';

/** The merchant reference in `/m/<ref>/...`: an `mrch_` id or a slug. */
const MerchantRef = z.object({ merchant: z.string().min(1).max(100) });
const SessionRef = MerchantRef.extend({ id: z.string().min(1).max(100) });

export const MandateType = z.enum(['svc', 'ap2', 'acp', 'none']);
export type MandateType = z.infer<typeof MandateType>;

/** The gate's decision on a checkout, as orders, verdicts and ingest reports carry it. */
export const Decision = z.enum(['accept', 'reject', 'hold']);
export type Decision = z.infer<typeof Decision>;

export const Manifest = z.object({
  protocol: z.literal('svc-checkout/0.1'),
  merchant: z.object({
    id: z.string(),
    name: z.string(),
    domain: z.string(),
    domain_verified: z.boolean().describe('True once the merchant proved control of `domain` (only then is it served there); false: the domain is the merchant\'s claim only.'),
  }),
  livemode: z.boolean(),
  catalog_url: z.string().describe('Relative path of the catalog.'),
  checkout_url: z.string().describe('Relative path to POST a checkout session to.'),
  jwks_url: z.string().describe('Relative path of the receipt key set.'),
  mcp_url: z.string().describe('Relative path of the merchant\'s MCP server (Streamable HTTP, stateless): the same catalog, checkout and x402 `buy` as MCP tools.'),
  rails: z.array(RailName),
  pay_to: z.object({
    x402: z.object({ chain: z.string(), address: z.string(), asset: z.string() }).optional(),
    mock: z.object({ account: z.string() }).optional(),
    card: z.object({ processor: z.string() }).optional(),
  }),
  mandate: z.object({ accepted: z.array(MandateType), preferred: MandateType }),
  policy_summary: z.object({
    require_mandate_over_usd: z.number().nullable(),
    max_per_transaction_usd: z.number().nullable(),
    min_reputation_tier: z.string().nullable(),
  }),
  paid_resources: z
    .array(z.object({ sku: z.string(), name: z.string(), url: z.string(), price: z.object({ amount: z.string(), currency: z.string() }) }))
    .optional()
    .describe('With the x402 rail: each available item as a resource any x402 client can buy (relative path; `?qty=` optional).'),
});
export type Manifest = z.infer<typeof Manifest>;

export const Buyer = z
  .object({
    name: z.string().min(1).max(200),
    shipping_address: z
      .object({
        line1: z.string().min(1).max(300),
        city: z.string().min(1).max(100),
        postal_code: z.string().min(1).max(20),
        country: z.string().regex(/^[A-Za-z]{2}$/, 'must be an ISO 3166-1 alpha-2 country code'),
      })
      .strict()
      .optional(),
  })
  .strict();

export const MandateInput = z
  .object({
    type: MandateType,
    token: z.string().max(16_384).optional().describe('Compact JWS for svc mandates.'),
    raw: z.unknown().optional(),
  })
  .strict();
export type MandateInput = z.infer<typeof MandateInput>;

export const CreateCheckoutBody = z
  .object({
    agent_id: z.string().uuid('must be a UUID'),
    items: z
      .array(z.object({ sku: z.string().min(1).max(128), qty: z.number().int().min(1).max(1000) }).strict())
      .min(1)
      .max(100)
      .refine((items) => new Set(items.map((i) => i.sku)).size === items.length, 'must list each SKU at most once'),
    buyer_intent: z.string().max(2000).optional(),
    mandate: MandateInput.optional(),
    rail: RailName.optional(),
    idempotency_key: z.string().min(1).max(255).optional(),
    buyer: Buyer.optional(),
  })
  .strict();
export type CreateCheckoutBody = z.infer<typeof CreateCheckoutBody>;

export const Total = z.object({ currency: z.string(), subtotal: z.string(), tax: z.string(), total: z.string() });
export type Total = z.infer<typeof Total>;

export const PaymentRequired = z.object({
  rail: RailName,
  scheme: z.enum(['x402-exact', 'mock', 'card']),
  payTo: z.string().nullable(),
  amount: z.string().describe('Exact decimal; for x402 the total rounded up to a whole base unit.'),
  currency: z.string(),
  amountBaseUnits: z.string().nullable().describe('Exact integer string of USDC base units (6 decimals).'),
  chain: ChainName.nullable(),
  chainId: z.number().int().nullable(),
  asset: z.literal('USDC').nullable(),
  verifyingContract: z.string().nullable().describe('The USDC token contract (EIP-712 verifyingContract).'),
  eip712Domain: z.object({ name: z.string(), version: z.string() }).nullable(),
  validUntil: z.number().int().describe('Unix seconds; equals expires_at.'),
});
export type PaymentRequired = z.infer<typeof PaymentRequired>;

export const CheckoutCreated = z.object({
  session_id: z.string(),
  state: z.literal('awaiting_payment'),
  livemode: z.boolean(),
  total: Total,
  payment_required: PaymentRequired,
  expires_at: z.number().int(),
  next: z.string().describe('The literal next call to make.'),
});
export type CheckoutCreated = z.infer<typeof CheckoutCreated>;

export const SessionState = z
  .enum(['awaiting_payment', 'settling', 'accepted', 'rejected', 'held', 'approved', 'expired'])
  .describe(
    'settling: the transfer is on its way to the chain (poll again); approved: the merchant approved a held order whose authorization expired, so sign a fresh one and settle (see `next`).',
  );
export type SessionState = z.infer<typeof SessionState>;
/** The gate's verdict on a session: what the session stores and shows. */
export const VerdictView = z.object({
  decision: Decision,
  tier: TrustTier,
  reasonCodes: z.array(z.string()),
  signals: z.record(z.string(), z.unknown()).describe('The inputs the verdict was computed from (diagnostic, free-form).'),
});
export type VerdictView = z.infer<typeof VerdictView>;

export const SessionView = z.object({
  id: z.string(),
  merchantId: z.string(),
  agentId: z.string(),
  state: SessionState,
  livemode: z.boolean(),
  lines: z.array(z.object({ sku: z.string(), name: z.string(), qty: z.number().int(), unitPrice: z.string(), lineTotal: z.string() })),
  total: Total,
  railName: RailName,
  paymentRequired: PaymentRequired.optional(),
  verdict: VerdictView.nullable(),
  verdictReasons: z
    .array(
      z.object({
        code: z.string(),
        rule: z.string().nullable().describe('The policy field that decided (e.g. holdForReviewBelowTier), null when no rule did.'),
        text: z.string().describe('What the rule saw, in words.'),
      }),
    )
    .optional()
    .describe('The verdict\'s reason codes explained: which rule of the policy decided and on what.'),
  payer: z.string().nullable().optional().describe('The wallet address that signed the x402 payment authorization (its `from`), once a payment was submitted; null on other rails.'),
  receipt: z.string().nullable(),
  orderId: z.string().nullable(),
  settlement: z.object({ rail: z.string(), reference: z.string() }).nullable(),
  paymentError: z
    .object({ reasonCodes: z.array(z.string()), errorHuman: z.string() })
    .nullable()
    .optional()
    .describe('Why the last payment failed to settle (for example CAPTURE_FAILED after a pending settlement did not land); pay again.'),
  createdAt: z.number().int(),
  expiresAt: z.number().int(),
  reviewExpiresAt: z.number().int().optional().describe('Held sessions: unix seconds when the 24 h review window ends (the hold is then rejected).'),
  next: z.string().optional(),
});
export type SessionView = z.infer<typeof SessionView>;

/** Unix seconds as a JSON integer, or as the decimal string @x402/evm sends. */
const UnixSeconds = z.union([z.number().int().nonnegative(), z.string().regex(/^\d{1,15}$/, 'must be integer unix seconds')]);

export const X402Authorization = z
  .object({
    from: z.string(),
    to: z.string(),
    value: z.string().describe('Integer base units, exactly amountBaseUnits.'),
    validAfter: UnixSeconds,
    validBefore: UnixSeconds,
    nonce: z.string().describe('0x-prefixed 32 bytes hex'),
  })
  .strict();
export type X402Authorization = z.infer<typeof X402Authorization>;

/** The exact-scheme payload as @x402/evm signs it: `{authorization, signature}`. */
const X402ExactPayload = z.object({ authorization: X402Authorization, signature: z.string() }).strict();

/** An x402 PaymentPayload as a stock client builds it: v2 (`accepted`) or v1 (`scheme`, `network`). */
export const X402PaymentPayload = z.union([
  z
    .object({
      x402Version: z.literal(2),
      accepted: z.object({ scheme: z.string(), network: z.string() }).passthrough(),
      payload: X402ExactPayload,
      resource: z.object({ url: z.string() }).passthrough().optional(),
      extensions: z.record(z.string(), z.unknown()).optional(),
    })
    .strict(),
  z.object({ x402Version: z.literal(1), scheme: z.string(), network: z.string(), payload: X402ExactPayload }).strict(),
]);

export const SettleBody = z
  .object({
    payment: z
      .union([
        z
          .object({
            scheme: z.string().describe('x402-exact (or x402\'s own name, exact)'),
            authorization: X402Authorization,
            signature: z
              .string()
              .describe("0x-prefixed hex: an EOA's 65-byte ECDSA signature, or a smart-contract wallet's (EIP-1271, ERC-6492-wrapped when undeployed), up to 4096 bytes"),
          })
          .strict(),
        z.object({ mock: z.literal(true) }).strict(),
        X402PaymentPayload,
      ])
      .optional()
      .describe('Omit it (or the whole body) and send PAYMENT-SIGNATURE / X-PAYMENT instead to pay with a stock x402 client.'),
  })
  .strict();
export type SettleBody = z.infer<typeof SettleBody>;

export const SettleAccepted = z.object({
  status: z.literal('accepted'),
  order_id: z.string(),
  receipt: z.string().describe('Compact JWS signed with the merchant receipt key.'),
  fulfillment: z.object({ rail: z.string(), reference: z.string() }),
});
export type SettleAccepted = z.infer<typeof SettleAccepted>;
export const SettleHeld = z.object({
  status: z.literal('hold'),
  review_url: z.string(),
  reason_codes: z.array(z.string()),
  error_human: z.string(),
  next: z.string(),
});
export type SettleHeld = z.infer<typeof SettleHeld>;
export const SettlePending = z.object({
  status: z.literal('settlement_pending'),
  reason_codes: z.array(z.string()).describe('["SETTLEMENT_PENDING"]'),
  error_human: z.string(),
  next: z.string().describe('The poll call: the session shows `settling` until the transfer is confirmed or released.'),
});
export type SettlePending = z.infer<typeof SettlePending>;
// Strict: exactly these keys, so it is told apart from the x402 402 body (X402Challenge) beside it.
export const SettlePaymentInvalid = z
  .object({
    status: z.literal('payment_invalid'),
    reason_codes: z.array(z.string()),
    error_human: z.string(),
  })
  .strict();
export type SettlePaymentInvalid = z.infer<typeof SettlePaymentInvalid>;
export const SettleRejected = z.object({
  status: z.literal('rejected'),
  reason_codes: z.array(z.string()),
  error_human: z.string(),
});
export type SettleRejected = z.infer<typeof SettleRejected>;

const agentMeta = (operationId: string) => meta({ auth: 'public', scopes: [], tag: 'Agent', operationId });

export const agentContract = c.router({
  manifest: {
    method: 'GET',
    path: '/.well-known/agentic-checkout.json',
    pathParams: MerchantRef,
    responses: { 200: Manifest, 304: c.noBody() },
    summary: 'Discovery manifest (ETag; 304 on If-None-Match)',
    description: 'Also served at the root of `<slug>.<discovery domain>` and of the merchant\'s own domain.',
    metadata: agentMeta('getManifest'),
  },
  jwks: {
    method: 'GET',
    path: '/.well-known/jwks.json',
    pathParams: MerchantRef,
    responses: { 200: Jwks },
    summary: 'The merchant\'s receipt public key set',
    metadata: agentMeta('getAgentJwks'),
  },
  catalog: {
    method: 'GET',
    path: '/agent/catalog',
    pathParams: MerchantRef,
    responses: { 200: z.object({ items: z.array(CatalogItem) }) },
    summary: 'Available catalog items',
    metadata: agentMeta('getAgentCatalog'),
  },
  createCheckout: {
    method: 'POST',
    path: '/agent/checkout',
    pathParams: MerchantRef,
    body: CreateCheckoutBody,
    responses: { 201: CheckoutCreated, 409: ErrorBody, 422: ErrorBody, 429: ErrorBody },
    summary: 'Open a checkout session',
    description: 'Idempotent on (agent_id, idempotency_key). Rate limited per agent and merchant (429 with Retry-After).',
    metadata: agentMeta('createCheckout'),
  },
  getCheckout: {
    method: 'GET',
    path: '/agent/checkout/:id',
    pathParams: SessionRef,
    responses: { 200: SessionView },
    summary: 'Poll a checkout session',
    metadata: agentMeta('getCheckout'),
  },
  settle: {
    method: 'POST',
    path: '/agent/checkout/:id/settle',
    pathParams: SessionRef,
    headers: X402RequestHeaders,
    body: SettleBody.optional(),
    responses: {
      200: SettleAccepted,
      202: z
        .union([SettleHeld, SettlePending])
        .describe('Held for merchant review, or sent to the chain and not yet confirmed (`settlement_pending`): poll `next`.'),
      402: z
        .union([SettlePaymentInvalid, X402Challenge])
        .describe('The payment was refused; with an x402 payment (header or x402 payload) or none at all on an x402 session, the x402 answer: PAYMENT-REQUIRED header and the v1 body.'),
      403: z.union([SettleRejected, ErrorBody]).describe('A gate rejection ({status: rejected, ...}) or, for a live key on a test-only rail, the plain error body.'),
      409: ErrorBody,
      410: ErrorBody,
    },
    summary: 'Run the acceptance gate and settle',
    description:
      'Gate order: mandate, replay, reputation, policy verdict, capture, receipt. A repeat of the same payment after a terminal result replays it byte for byte.',
    metadata: agentMeta('settleCheckout'),
  },
}, { pathPrefix: '/m/:merchant', commonResponses: publicErrors });
