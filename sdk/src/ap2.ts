import { base64url, SignJWT, type CryptoKey, type KeyObject } from 'jose';

/** The agent's key an open AP2 mandate binds in `cnf.jwk`, and its JWS alg (ES256, EdDSA, ...). */
export type Ap2Holder = { key: CryptoKey | KeyObject | Uint8Array; alg: string };

/**
 * An AP2 mandate presentation (docs/agent-protocol.md "AP2 mandates"): the issuer's SD-JWT
 * (`issuer-jwt~disclosure~...~`, the disclosures the agent chose to show) followed, when the
 * credential binds the agent's key (`cnf`), by a key-binding JWT (RFC 9901 section 4.3: typ
 * `kb+jwt`, `sd_hash` over the presentation, `aud` the merchant, a fresh nonce, `iat` now) signed
 * with that key. Returns the `mandate` a checkout takes.
 */
export async function presentAp2Mandate(
  credential: string,
  options: { audience: string; holder?: Ap2Holder; nonce?: string; now?: Date },
): Promise<{ type: 'ap2'; token: string }> {
  const sdJwt = credential.endsWith('~') ? credential : `${credential}~`;
  if (!options.holder) return { type: 'ap2', token: sdJwt };
  const sdHash = base64url.encode(new Uint8Array(await globalThis.crypto.subtle.digest('SHA-256', new TextEncoder().encode(sdJwt))));
  const kb = await new SignJWT({ sd_hash: sdHash, nonce: options.nonce ?? globalThis.crypto.randomUUID() })
    .setProtectedHeader({ alg: options.holder.alg, typ: 'kb+jwt' })
    .setAudience(options.audience)
    .setIssuedAt(Math.floor((options.now ?? new Date()).getTime() / 1000))
    .sign(options.holder.key);
  return { type: 'ap2', token: sdJwt + kb };
}
