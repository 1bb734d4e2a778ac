import { z } from 'zod';
import { c, meta, publicErrors } from './common.js';
import { ErrorBody } from './errors.js';

/**
 * x402 on the wire (https://github.com/coinbase/x402, specs/ v2 HTTP transport, and v1 for
 * older clients). The headers carry base64 JSON in the shapes of `@x402/core`'s
 * PaymentRequired / PaymentPayload / SettleResponse; the server encodes and decodes them with
 * `@x402/core/http`. These schemas describe what this API adds or answers in bodies.
 */
export const X402_HEADERS = {
  /** v2, response of a 402: base64 JSON PaymentRequired. */
  paymentRequired: 'PAYMENT-REQUIRED',
  /** v2, request: base64 JSON PaymentPayload. */
  paymentSignature: 'PAYMENT-SIGNATURE',
  /** v2, response of a paid request: base64 JSON SettleResponse. */
  paymentResponse: 'PAYMENT-RESPONSE',
  /** v1, request: base64 JSON PaymentPayload (x402Version 1). */
  xPayment: 'X-PAYMENT',
  /** v1, response of a paid request: base64 JSON SettleResponse. */
  xPaymentResponse: 'X-PAYMENT-RESPONSE',
  /** Ours: the agent id (UUID) a stock x402 client may add; without it the id derives from the payer. */
  agentId: 'X-Agent-Id',
} as const;

/** The request headers of an x402-paying call (ts-rest sees them lower-cased). */
export const X402RequestHeaders = z.object({
  'payment-signature': z.string().max(16_384).optional().describe('x402 v2: base64 JSON PaymentPayload.'),
  'x-payment': z.string().max(16_384).optional().describe('x402 v1: base64 JSON PaymentPayload (x402Version 1).'),
});

/** x402 v1 PaymentRequirements (network names, `maxAmountRequired`). */
export const X402RequirementsV1 = z.object({
  scheme: z.literal('exact'),
  network: z.enum(['base', 'base-sepolia']),
  maxAmountRequired: z.string().describe('Integer string of USDC base units (6 decimals).'),
  resource: z.string().describe('Absolute URL of the resource being paid.'),
  description: z.string(),
  mimeType: z.string(),
  payTo: z.string(),
  maxTimeoutSeconds: z.number().int(),
  asset: z.string().describe('The USDC token contract.'),
  extra: z.object({ name: z.string(), version: z.string() }).describe('The EIP-712 domain of the token.'),
});

/** x402 v2 PaymentRequirements of the exact scheme (CAIP-2 network, `amount`), as the PAYMENT-REQUIRED header carries them. */
export const X402RequirementsV2 = z.object({
  scheme: z.literal('exact'),
  network: z.string().describe('CAIP-2 chain id, for example eip155:8453.'),
  amount: z.string().describe('Integer string of USDC base units (6 decimals).'),
  asset: z.string().describe('The USDC token contract.'),
  payTo: z.string(),
  maxTimeoutSeconds: z.number().int(),
  extra: z.object({ name: z.string(), version: z.string() }).describe('The EIP-712 domain of the token.'),
});

/** The x402 v2 PaymentRequired (the PAYMENT-REQUIRED header's JSON; MCP sends it as a tool result). */
export const X402PaymentRequiredV2 = z.object({
  x402Version: z.literal(2),
  error: z.string().optional(),
  resource: z.object({ url: z.string(), description: z.string().optional(), mimeType: z.string().optional() }),
  accepts: z.array(X402RequirementsV2),
  extensions: z.record(z.string(), z.unknown()).optional(),
});

/**
 * The body of every x402 402: the v1 PaymentRequired (so v1 clients can pay from the body;
 * v2 clients read the PAYMENT-REQUIRED header, which carries the same requirement in v2 form)
 * plus our `status`, `reason_codes` and `error_human`.
 */
export const X402Challenge = z.object({
  x402Version: z.literal(1),
  error: z.string().describe('The x402 error reason (for example `invalid_exact_evm_payload_authorization_valid_before`); `payment_required` before any payment.'),
  accepts: z.array(X402RequirementsV1),
  status: z.enum(['payment_required', 'payment_invalid', 'rejected']),
  reason_codes: z.array(z.string()),
  error_human: z.string(),
  session_id: z.string().optional().describe('The checkout session the payment was tried on, once one exists.'),
});
export type X402Challenge = z.infer<typeof X402Challenge>;

export const X402Purchase = z.object({
  status: z.literal('accepted'),
  session_id: z.string(),
  order_id: z.string(),
  receipt: z.string().describe('Compact JWS signed with the merchant receipt key.'),
  fulfillment: z.object({ rail: z.string(), reference: z.string().describe('The transaction hash (PAYMENT-RESPONSE `transaction`).') }),
});

export const X402Deferred = z.object({
  status: z.enum(['hold', 'settlement_pending']),
  session_id: z.string(),
  review_url: z.string().optional(),
  reason_codes: z.array(z.string()),
  error_human: z.string(),
  next: z.string().describe('The poll call for the session.'),
});

const ResourceRef = z.object({
  merchant: z.string().min(1).max(100),
  sku: z.string().min(1).max(128),
});

export const X402ResourceQuery = z
  .object({ qty: z.string().regex(/^[1-9]\d{0,2}$|^1000$/, 'must be an integer from 1 to 1000').optional().describe('Quantity, default 1.') })
  .strict();

export const x402Contract = c.router({
  resource: {
    method: 'GET',
    path: '/x402/:sku',
    pathParams: ResourceRef,
    query: X402ResourceQuery,
    headers: X402RequestHeaders.extend({
      'x-agent-id': z.string().uuid('must be a UUID').optional().describe('Optional agent id; without it the agent id is the name-based UUID of the payer address.'),
    }),
    responses: {
      200: X402Purchase,
      202: X402Deferred,
      402: X402Challenge,
      409: ErrorBody,
      410: ErrorBody,
      422: ErrorBody,
      429: ErrorBody,
    },
    summary: 'Buy one catalog item with any x402 client',
    description:
      'A paid resource per catalog item (also at the root of the discovery host and the merchant domain). Unpaid: 402 with the requirements. Paid (PAYMENT-SIGNATURE or X-PAYMENT): the same checkout session, acceptance gate and settlement engine as the JSON flow. ' +
      '200: the order, its receipt and the transaction, with PAYMENT-RESPONSE (v2) or X-PAYMENT-RESPONSE (v1). ' +
      '202: held for merchant review, or the transfer is not confirmed yet: poll `next`; no PAYMENT-RESPONSE (nothing settled yet; do not pay again). ' +
      '402: unpaid, or the payment was refused (verification, settlement or the merchant gate): PAYMENT-REQUIRED header (v2) and the v1 body.',
    metadata: meta({ auth: 'public', scopes: [], tag: 'Agent', operationId: 'buyWithX402' }),
  },
}, { pathPrefix: '/m/:merchant', commonResponses: publicErrors });
