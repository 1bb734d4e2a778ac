import canonicalize from 'canonicalize';
import { sha256 } from './crypto.js';

/** RFC 8785 (JCS) canonical JSON. */
export function canonicalJson(value: unknown): string {
  const out = canonicalize(value);
  if (out === undefined) throw new TypeError('value cannot be canonicalized');
  return out;
}

/** sha256 hex of the JCS form: the policy hash and the receipt's input fingerprint. */
export function canonicalHash(value: unknown): string {
  return sha256(canonicalJson(value));
}
