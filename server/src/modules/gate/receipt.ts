import { CompactSign, compactVerify, createLocalJWKSet, decodeProtectedHeader, importJWK, type JWK } from 'jose';
import { canonicalHash } from '../../lib/canonical-json.js';

export const RECEIPT_TYP = 'svc-receipt+jws';
export const RECEIPT_ISSUER = 'svc-checkout';

/** decisions.md "Receipts": the claims of the Ed25519-signed receipt. */
export type ReceiptClaims = {
  iss: 'svc-checkout';
  sub: string;
  iat: number;
  sessionId: string;
  orderId: string;
  merchantId: string;
  agentId: string;
  decision: 'accept';
  total: { currency: string; subtotal: string; tax: string; total: string };
  reasonCodes: string[];
  mandateType: string;
  mandateRef: string | null;
  policyHash: string;
  policyVersion: number;
  rail: string;
  settlementRef: string;
  chain: string | null;
  livemode: boolean;
  inputFingerprint: string;
};

/** A receipt that fails verification: bad header, unknown kid, bad signature or wrong claims. */
export class ReceiptVerificationError extends Error {
  override readonly name = 'ReceiptVerificationError';
}

/** Signs the receipt as a compact JWS with header {alg: EdDSA, typ: svc-receipt+jws, kid}. */
export async function signReceipt(key: { d: string; x: string; kid: string }, claims: ReceiptClaims): Promise<string> {
  const privateKey = await importJWK({ kty: 'OKP', crv: 'Ed25519', d: key.d, x: key.x }, 'EdDSA');
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg: 'EdDSA', typ: RECEIPT_TYP, kid: key.kid })
    .sign(privateKey);
}

/** Offline verification against a merchant JWKS (tests, and the SDK's verifier). */
export async function verifyReceiptJws(jws: string, jwks: { keys: JWK[] }): Promise<ReceiptClaims> {
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(jws);
  } catch {
    throw new ReceiptVerificationError('receipt is not a compact JWS');
  }
  if (header.alg !== 'EdDSA') throw new ReceiptVerificationError(`receipt alg must be EdDSA, got ${String(header.alg)}`);
  if (header.typ !== RECEIPT_TYP) throw new ReceiptVerificationError(`receipt typ must be ${RECEIPT_TYP}, got ${String(header.typ)}`);
  if (typeof header.kid !== 'string' || !jwks.keys.some((k) => k.kid === header.kid)) {
    throw new ReceiptVerificationError(`receipt kid ${String(header.kid)} is not in the merchant JWKS`);
  }
  let payload: Uint8Array;
  try {
    ({ payload } = await compactVerify(jws, createLocalJWKSet(jwks), { algorithms: ['EdDSA'] }));
  } catch (err) {
    throw new ReceiptVerificationError(`receipt signature does not verify: ${err instanceof Error ? err.message : String(err)}`);
  }
  let claims: unknown;
  try {
    claims = JSON.parse(new TextDecoder().decode(payload));
  } catch {
    throw new ReceiptVerificationError('receipt payload is not JSON');
  }
  if (typeof claims !== 'object' || claims === null || (claims as { iss?: unknown }).iss !== RECEIPT_ISSUER) {
    throw new ReceiptVerificationError(`receipt iss must be ${RECEIPT_ISSUER}`);
  }
  return claims as ReceiptClaims;
}

/** sha256 hex of the JCS canonical JSON of the gate's inputs, embedded in the receipt. */
export function inputFingerprint(inputs: unknown): string {
  return canonicalHash(inputs);
}
