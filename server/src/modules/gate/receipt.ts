import { CompactSign, importJWK } from 'jose';
import { RECEIPT_TYP, REFUND_RECEIPT_TYP, type ReceiptClaims, type RefundReceiptClaims } from '@svc/contract';
import { canonicalHash } from '../../lib/canonical-json.js';

export { RECEIPT_TYP, type ReceiptClaims };

/** A merchant's receipt signing key as the signer takes it: the (non-extractable) private key and its kid. */
export type ReceiptSigningKey = { key: Awaited<ReturnType<typeof importJWK>>; kid: string };

/** Each merchant's imported receipt key, per process (services.caches.receiptKeys; settlement/accepted.ts fills it). */
export type ReceiptKeys = Map<string, Promise<ReceiptSigningKey>>;

/** Imports a receipt seed (base64url `d` and public `x` of an Ed25519 JWK) for `signReceipt`. */
export async function importReceiptKey(key: { d: string; x: string; kid: string }): Promise<ReceiptSigningKey> {
  return { key: await importJWK({ kty: 'OKP', crv: 'Ed25519', d: key.d, x: key.x }, 'EdDSA'), kid: key.kid };
}

/**
 * Signs the receipt (verification is the SDK's `verifyReceipt`, the one shipped to agents) as a
 * compact JWS with header {alg: EdDSA, typ: svc-receipt+jws, kid}, with an imported key
 * (`importReceiptKey`; the settle path caches one per merchant) or a seed's JWK fields.
 */
export async function signReceipt(key: ReceiptSigningKey | { d: string; x: string; kid: string }, claims: ReceiptClaims): Promise<string> {
  const signing = 'key' in key ? key : await importReceiptKey(key);
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg: 'EdDSA', typ: RECEIPT_TYP, kid: signing.kid })
    .sign(signing.key);
}

/** Signs a refund receipt like a sale receipt, with its own `typ` so neither can pass for the other. */
export async function signRefundReceipt(key: ReceiptSigningKey, claims: RefundReceiptClaims): Promise<string> {
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg: 'EdDSA', typ: REFUND_RECEIPT_TYP, kid: key.kid })
    .sign(key.key);
}

/** sha256 hex of the JCS canonical JSON of the gate's inputs, embedded in the receipt. */
export function inputFingerprint(inputs: unknown): string {
  return canonicalHash(inputs);
}
