import { CompactSign, importJWK } from 'jose';
import { RECEIPT_TYP, type ReceiptClaims } from '@svc/contract';
import { canonicalHash } from '../../lib/canonical-json.js';

export { RECEIPT_TYP, type ReceiptClaims };

/** Signs the receipt (verification is the SDK's `verifyReceipt`, the one shipped to agents) as a compact JWS with header {alg: EdDSA, typ: svc-receipt+jws, kid}. */
export async function signReceipt(key: { d: string; x: string; kid: string }, claims: ReceiptClaims): Promise<string> {
  const privateKey = await importJWK({ kty: 'OKP', crv: 'Ed25519', d: key.d, x: key.x }, 'EdDSA');
  return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
    .setProtectedHeader({ alg: 'EdDSA', typ: RECEIPT_TYP, kid: key.kid })
    .sign(privateKey);
}

/** sha256 hex of the JCS canonical JSON of the gate's inputs, embedded in the receipt. */
export function inputFingerprint(inputs: unknown): string {
  return canonicalHash(inputs);
}
