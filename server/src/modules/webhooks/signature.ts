import { createHmac, randomBytes } from 'node:crypto';

/** `whsec_` + 32 random bytes in base64url; the whole string is the HMAC key. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * The Svc-Signature header: `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, one
 * `v1` per secret (two during a rotation). Section 6; the sdk's verifyWebhook mirrors it.
 */
export function signatureHeader(body: string, secrets: readonly string[], t: number): string {
  const signed = Buffer.concat([Buffer.from(`${t}.`, 'utf8'), Buffer.from(body, 'utf8')]);
  const parts = secrets.map((s) => `v1=${createHmac('sha256', s).update(signed).digest('hex')}`);
  return [`t=${t}`, ...parts].join(',');
}
