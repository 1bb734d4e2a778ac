import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';

/** RFC 8785 (JCS) canonical JSON. */
export function canonicalJson(value: unknown): string {
  const out = canonicalize(value);
  if (out === undefined) throw new TypeError('value cannot be canonicalized');
  return out;
}

export function sha256Hex(data: string | Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** sha256 hex of the JCS form: the policy hash and the receipt's input fingerprint. */
export function canonicalHash(value: unknown): string {
  return sha256Hex(canonicalJson(value));
}
