import { compactVerify, createLocalJWKSet, decodeProtectedHeader, type JWK } from 'jose';
import { z } from 'zod';
import {
  Jwks,
  RECEIPT_ISSUER,
  RECEIPT_TYP,
  REFUND_RECEIPT_TYP,
  ReceiptClaims as ReceiptClaimsSchema,
  RefundReceiptClaims as RefundReceiptClaimsSchema,
} from '@svc/contract';
import { SvcError } from './errors.js';
import type { FetchLike } from './http.js';

export { RECEIPT_ISSUER, RECEIPT_TYP, REFUND_RECEIPT_TYP };

/** The contract's receipt claims; unknown extra claims are kept, so a newer server does not break an older SDK. */
export const ReceiptClaims = ReceiptClaimsSchema.passthrough();
export type ReceiptClaims = z.infer<typeof ReceiptClaims>;
/** The contract's refund receipt claims (typ svc-refund-receipt+jws), unknown extra claims kept likewise. */
export const RefundReceiptClaims = RefundReceiptClaimsSchema.passthrough();
export type RefundReceiptClaims = z.infer<typeof RefundReceiptClaims>;

export type ReceiptVerificationReason =
  | 'RECEIPT_MALFORMED'
  | 'RECEIPT_ALG_INVALID'
  | 'RECEIPT_TYP_INVALID'
  | 'RECEIPT_KID_UNKNOWN'
  | 'RECEIPT_SIGNATURE_INVALID'
  | 'RECEIPT_ISSUER_INVALID'
  | 'RECEIPT_CLAIMS_INVALID'
  | 'RECEIPT_CLAIM_MISMATCH'
  | 'JWKS_UNAVAILABLE';

/** A receipt that must not be trusted; `reason` says which check failed. */
export class ReceiptVerificationError extends SvcError {
  override readonly name: string = 'ReceiptVerificationError';
  constructor(
    readonly reason: ReceiptVerificationReason,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export type ReceiptKeySource =
  /** The merchant's key set, e.g. from `GET /v1/merchants/{id}/jwks` or `/.well-known/jwks.json`. */
  | { jwks: { keys: JWK[] } }
  /** Fetched from this URL (with `fetch`, default the global one). */
  | { jwksUrl: string; fetch?: FetchLike };

export type VerifyReceiptOptions = ReceiptKeySource & {
  /** `sale` (default): the receipt of an accepted order. `refund`: use VerifyRefundReceiptOptions. */
  kind?: 'sale' | undefined;
  /** Claims that must equal these values (e.g. the order you were told about). */
  expected?: Partial<Pick<ReceiptClaims, 'merchantId' | 'orderId' | 'sessionId' | 'agentId' | 'livemode'>> | undefined;
};

export type VerifyRefundReceiptOptions = ReceiptKeySource & {
  /** A refund receipt (`refund.receipt`, typ svc-refund-receipt+jws), signed by the same merchant key. */
  kind: 'refund';
  /** Claims that must equal these values (e.g. the refund and order you were told about). */
  expected?: Partial<Pick<RefundReceiptClaims, 'merchantId' | 'orderId' | 'refundId' | 'transaction' | 'amount' | 'currency' | 'livemode'>> | undefined;
};

/** Fetches and checks a JWKS document; failures are ReceiptVerificationError JWKS_UNAVAILABLE. */
export async function fetchJwks(url: string, fetchImpl: FetchLike = (i, init) => globalThis.fetch(i, init)): Promise<{ keys: JWK[] }> {
  let res: Response;
  try {
    res = await fetchImpl(url, { method: 'GET', headers: { accept: 'application/json' }, signal: AbortSignal.timeout(10_000) });
  } catch (err) {
    throw new ReceiptVerificationError('JWKS_UNAVAILABLE', `the key set at ${url} could not be fetched`, { cause: err });
  }
  if (res.status !== 200) throw new ReceiptVerificationError('JWKS_UNAVAILABLE', `the key set at ${url} answered ${res.status}`);
  let json: unknown;
  try {
    json = await res.json();
  } catch (err) {
    throw new ReceiptVerificationError('JWKS_UNAVAILABLE', `the key set at ${url} is not JSON`, { cause: err });
  }
  const parsed = Jwks.safeParse(json);
  if (!parsed.success) throw new ReceiptVerificationError('JWKS_UNAVAILABLE', `the document at ${url} is not an Ed25519 key set`);
  return parsed.data;
}

/**
 * Verifies a receipt offline against the merchant's key set: header `alg` EdDSA and `typ`
 * svc-receipt+jws (a sale) or svc-refund-receipt+jws (`kind: 'refund'`), a `kid` present in the
 * set, the Ed25519 signature, `iss` svc-checkout and the claim shapes. Returns the typed claims;
 * throws ReceiptVerificationError otherwise. The two `typ`s keep a refund receipt from passing
 * for a sale and the other way round.
 */
export function verifyReceipt(jws: string, options: VerifyReceiptOptions): Promise<ReceiptClaims>;
export function verifyReceipt(jws: string, options: VerifyRefundReceiptOptions): Promise<RefundReceiptClaims>;
export function verifyReceipt(jws: string, options: VerifyReceiptOptions | VerifyRefundReceiptOptions): Promise<ReceiptClaims | RefundReceiptClaims> {
  return options.kind === 'refund' ? verifyJws(jws, REFUND_RECEIPT_TYP, RefundReceiptClaims, options) : verifyJws(jws, RECEIPT_TYP, ReceiptClaims, options);
}

/** `verifyReceipt(jws, { ...options, kind: 'refund' })`: a refund's `receipt`. */
export function verifyRefundReceipt(jws: string, options: ReceiptKeySource & Pick<VerifyRefundReceiptOptions, 'expected'>): Promise<RefundReceiptClaims> {
  return verifyReceipt(jws, { ...options, kind: 'refund' });
}

async function verifyJws<S extends z.ZodTypeAny>(jws: string, typ: string, schema: S, options: ReceiptKeySource & { expected?: Record<string, unknown> | undefined }): Promise<z.infer<S>> {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(jws);
  } catch (err) {
    throw new ReceiptVerificationError('RECEIPT_MALFORMED', 'the receipt is not a compact JWS', { cause: err });
  }
  if (header.alg !== 'EdDSA') throw new ReceiptVerificationError('RECEIPT_ALG_INVALID', `receipt alg must be EdDSA, got ${String(header.alg)}`);
  if (header.typ !== typ) {
    const hint = header.typ === REFUND_RECEIPT_TYP ? " (a refund receipt: verify it with kind: 'refund')" : header.typ === RECEIPT_TYP ? ' (a sale receipt, not a refund receipt)' : '';
    throw new ReceiptVerificationError('RECEIPT_TYP_INVALID', `receipt typ must be ${typ}, got ${String(header.typ)}${hint}`);
  }
  if (typeof header.kid !== 'string' || header.kid.length === 0) throw new ReceiptVerificationError('RECEIPT_KID_UNKNOWN', 'the receipt header has no kid');

  const jwks = 'jwks' in options ? options.jwks : await fetchJwks(options.jwksUrl, options.fetch);
  if (!jwks.keys.some((k) => k.kid === header.kid)) {
    throw new ReceiptVerificationError('RECEIPT_KID_UNKNOWN', `receipt kid ${header.kid} is not in the merchant JWKS`);
  }
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(jws, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] }));
  } catch (err) {
    throw new ReceiptVerificationError('RECEIPT_SIGNATURE_INVALID', 'the receipt signature does not verify against the merchant key', { cause: err });
  }
  let raw: unknown;
  try {
    raw = JSON.parse(new TextDecoder().decode(payload));
  } catch (err) {
    throw new ReceiptVerificationError('RECEIPT_MALFORMED', 'the receipt payload is not JSON', { cause: err });
  }
  if (typeof raw !== 'object' || raw === null || (raw as { iss?: unknown }).iss !== RECEIPT_ISSUER) {
    throw new ReceiptVerificationError('RECEIPT_ISSUER_INVALID', `receipt iss must be ${RECEIPT_ISSUER}`);
  }
  const claims = schema.safeParse(raw);
  if (!claims.success) {
    const issue = claims.error.issues[0];
    throw new ReceiptVerificationError('RECEIPT_CLAIMS_INVALID', `receipt claim ${issue?.path.join('.') ?? '?'}: ${issue?.message ?? 'invalid'}`);
  }
  for (const [name, want] of Object.entries(options.expected ?? {})) {
    if (want === undefined) continue;
    const got = (claims.data as Record<string, unknown>)[name];
    if (got !== want) throw new ReceiptVerificationError('RECEIPT_CLAIM_MISMATCH', `receipt ${name} is ${String(got)}, expected ${String(want)}`);
  }
  return claims.data as z.infer<S>;
}
