import { z } from 'zod';
import { c, IsoTimestamp, idRef, keyErrors, listEnvelope, ListQuery, meta, prefixedId } from './common.js';
import { ErrorBody } from './errors.js';
import { ChainName } from './chains.js';

/**
 * Refunds (docs/settlement.md "Refunds"): the merchant gives money back from its own receiving
 * wallet. The service never holds funds, so a refund is two calls: create (the service answers
 * the EIP-3009 typed data to sign) and authorize (the merchant's signature; the service carries
 * the transfer like a payment, with the roles turned round).
 */

export const RefundReason = z.enum(['requested_by_customer', 'duplicate', 'fraudulent', 'other']);
export type RefundReason = z.infer<typeof RefundReason>;

export const RefundStatus = z
  .enum(['requires_authorization', 'pending', 'succeeded', 'failed', 'canceled'])
  .describe(
    'requires_authorization: waiting for the merchant\'s signature (authorization_request); pending: signed and on its way to the chain; succeeded: the transfer is mined (transaction); failed: the transfer did not happen (failure); canceled: canceled, or the authorization window lapsed unused.',
  );
export type RefundStatus = z.infer<typeof RefundStatus>;

/** An exact refund amount in the order's currency: never a JSON number. */
const RefundAmount = z.string().regex(/^\d{1,12}(\.\d{1,18})?$/, 'must be a decimal string like "12.50"');

/**
 * The EIP-712 typed data of the refund's EIP-3009 TransferWithAuthorization, as viem's
 * `signTypedData` takes it (`types` without EIP712Domain; add it for `eth_signTypedData_v4`).
 * `value` is a decimal string of base units; the times are unix seconds.
 */
export const RefundTypedData = z.object({
  domain: z.object({ name: z.string(), version: z.string(), chainId: z.number().int(), verifyingContract: z.string() }),
  types: z.object({ TransferWithAuthorization: z.array(z.object({ name: z.string(), type: z.string() })) }),
  primaryType: z.literal('TransferWithAuthorization'),
  message: z.object({
    from: z.string().describe('The merchant\'s receiving address the order was paid to (the signer).'),
    to: z.string().describe('The address that paid the order.'),
    value: z.string().describe('The refund in token base units (USDC: 6 decimals), an integer string.'),
    validAfter: z.number().int().describe('Unix seconds.'),
    validBefore: z.number().int().describe('Unix seconds; the refund is canceled when it passes unsigned.'),
    nonce: z.string().describe('0x-prefixed 32 bytes hex, fresh and random.'),
  }),
});
export type RefundTypedData = z.infer<typeof RefundTypedData>;

export const RefundAuthorizationRequest = z.object({
  typed_data: RefundTypedData,
  next: z.string().describe('The call that takes the signature: POST /v1/refunds/{id}/authorize.'),
});
export type RefundAuthorizationRequest = z.infer<typeof RefundAuthorizationRequest>;

export const Refund = z.object({
  id: prefixedId('re'),
  order_id: z.string(),
  merchant_id: z.string(),
  status: RefundStatus,
  amount: z.string().describe('Exact decimal string in the order\'s currency: the amount asked, rounded down to a whole base unit.'),
  amount_base_units: z.string().describe('The refund in token base units, an integer string.'),
  currency: z.string(),
  reason: RefundReason.nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
  chain: ChainName,
  transaction: z.string().nullable().describe('The transaction hash of the transfer once succeeded.'),
  receipt: z.string().nullable().describe('Once succeeded: a compact JWS (EdDSA, typ svc-refund-receipt+jws) signed with the merchant receipt key; verify it against the merchant JWKS.'),
  failure: ErrorBody.nullable().describe('Why the refund failed (status failed) or was canceled.'),
  authorization_request: RefundAuthorizationRequest.nullable().describe('While requires_authorization: the typed data to sign and the call to send the signature to.'),
  livemode: z.boolean(),
  created_at: IsoTimestamp,
  updated_at: IsoTimestamp,
});
export type Refund = z.infer<typeof Refund>;

export const RefundStatusOfOrder = z.enum(['none', 'partial', 'full']);
export type RefundStatusOfOrder = z.infer<typeof RefundStatusOfOrder>;

/** The refund object of a `refund.*` event's `data.object`: the refund without its authorization request. */
export const RefundEventObject = Refund.omit({ authorization_request: true });
export type RefundEventObject = z.infer<typeof RefundEventObject>;

export const CreateRefundBody = z
  .object({
    order_id: z.string().min(1).max(100),
    amount: RefundAmount.optional().describe('Default: what the order has not refunded yet (captured minus pending, succeeded and awaiting refunds).'),
    reason: RefundReason.optional(),
    metadata: z.record(z.string(), z.unknown()).optional(),
  })
  .strict();
export type CreateRefundBody = z.infer<typeof CreateRefundBody>;

export const AuthorizeRefundBody = z
  .object({ signature: z.string().min(1).max(200).describe('0x-prefixed 65-byte signature of authorization_request.typed_data by its message.from.') })
  .strict();
export type AuthorizeRefundBody = z.infer<typeof AuthorizeRefundBody>;

export const RefundListQuery = ListQuery(20)
  .extend({ order_id: idRef('ord').optional().describe('Only the refunds of this order.') })
  .strict();
export type RefundListQuery = z.infer<typeof RefundListQuery>;

export const REFUND_RECEIPT_TYP = 'svc-refund-receipt+jws';

/** The claims of a refund receipt (compact JWS, EdDSA, by the merchant receipt key). */
export const RefundReceiptClaims = z.object({
  iss: z.literal('svc-checkout'),
  sub: z.string().describe('The re_ id.'),
  iat: z.number().int(),
  refundId: z.string(),
  orderId: z.string(),
  merchantId: z.string(),
  amount: z.string(),
  amountBaseUnits: z.string(),
  currency: z.string(),
  chain: z.string(),
  transaction: z.string(),
  livemode: z.boolean(),
});
export type RefundReceiptClaims = z.infer<typeof RefundReceiptClaims>;

const RefundParams = z.object({ id: idRef('re') });
const writeMeta = (operationId: string) => meta({ auth: 'key', scopes: ['refunds:write'], tag: 'Refunds', operationId });
const readMeta = (operationId: string) => meta({ auth: 'key', scopes: ['refunds:read'], tag: 'Refunds', operationId });

export const refundsContract = c.router({
  create: {
    method: 'POST',
    path: '',
    body: CreateRefundBody,
    responses: { 201: Refund, 409: ErrorBody, 422: ErrorBody },
    summary: 'Create a refund of an accepted order; answers the typed data to sign',
    description:
      'Idempotency-Key honoured. The refund starts requires_authorization with authorization_request: the EIP-3009 TransferWithAuthorization from the merchant\'s receiving address to the payer, valid about 10 minutes. 409 ORDER_NOT_REFUNDABLE for an order without a settlement (held, rejected, ingested); 422 REFUND_EXCEEDS_REMAINING when the refunds awaiting, pending and succeeded would pass what the order captured.',
    metadata: writeMeta('createRefund'),
  },
  authorize: {
    method: 'POST',
    path: '/:id/authorize',
    pathParams: RefundParams,
    body: AuthorizeRefundBody,
    responses: { 200: Refund, 202: Refund, 402: ErrorBody, 409: ErrorBody, 410: ErrorBody, 422: ErrorBody, 503: ErrorBody },
    summary: 'Send the merchant\'s signature: the refund is carried to the chain',
    description:
      'Idempotency-Key honoured. 200 with the refund succeeded (or failed); 202 while the transfer is not confirmed (poll GET /v1/refunds/{id}). 422 SIGNER_MISMATCH when the signature does not recover to authorization_request.typed_data.message.from (nothing is sent); 410 REFUND_AUTHORIZATION_EXPIRED past validBefore; 402 INSUFFICIENT_FUNDS when the merchant wallet cannot pay (the refund stays authorizable); 402 NONCE_ALREADY_USED when the authorization was canceled or its nonce spent on chain (the refund is canceled); 503 FACILITATOR_UNAVAILABLE when nothing could be sent (the refund stays authorizable); 409 REFUND_NOT_AUTHORIZABLE once authorized, canceled or finished.',
    metadata: writeMeta('authorizeRefund'),
  },
  cancel: {
    method: 'POST',
    path: '/:id/cancel',
    pathParams: RefundParams,
    body: c.noBody(),
    responses: { 200: Refund, 409: ErrorBody },
    summary: 'Cancel a refund that was not authorized yet',
    metadata: writeMeta('cancelRefund'),
  },
  get: {
    method: 'GET',
    path: '/:id',
    pathParams: RefundParams,
    responses: { 200: Refund },
    summary: 'Retrieve a refund',
    metadata: readMeta('getRefund'),
  },
  list: {
    method: 'GET',
    path: '',
    query: RefundListQuery,
    responses: { 200: listEnvelope(Refund) },
    summary: 'List refunds, newest first',
    metadata: readMeta('listRefunds'),
  },
}, { pathPrefix: '/v1/refunds', commonResponses: keyErrors });
