import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * What a delivery's body parses to, once verified: narrow on `type` (`order.*` events carry an
 * order, `webhook_endpoint.test` the endpoint tested; never fulfil on a test event).
 */
export type { WebhookEvent, OrderWebhookEvent, EndpointTestWebhookEvent, WebhookEventType } from '@svc/contract';

export type VerifyWebhookReason =
  | 'SIGNATURE_HEADER_MISSING'
  | 'SIGNATURE_HEADER_MALFORMED'
  | 'TIMESTAMP_OUT_OF_TOLERANCE'
  | 'SIGNATURE_MISMATCH'
  | 'SECRET_MISSING';

export type VerifyWebhookResult = {
  ok: boolean;
  reason?: VerifyWebhookReason;
  /** The header's `t` (Unix seconds) whenever it could be read. */
  timestamp?: number;
};

export type VerifyWebhookOptions = {
  /** Largest allowed distance between `t` and now, in seconds, either way. Default 300. */
  toleranceSecs?: number | undefined;
  /** Current time in Unix seconds (default: the clock). */
  now?: number | undefined;
};

export const DEFAULT_TOLERANCE_SECS = 300;
const HEX64 = /^[0-9a-f]{64}$/;

type ParsedHeader = { t: number; v1: string[] };

/** `t=<unix seconds>,v1=<hex>[,v1=<hex>...]`; other schemes are ignored, a second `t` is malformed. */
function parseHeader(header: string): ParsedHeader | null {
  let t: number | null = null;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq <= 0) return null;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't') {
      if (t !== null || !/^\d{1,12}$/.test(value)) return null;
      t = Number(value);
    } else if (key === 'v1') {
      const hex = value.toLowerCase();
      if (!HEX64.test(hex)) return null;
      v1.push(hex);
    }
  }
  if (t === null || v1.length === 0) return null;
  return { t, v1 };
}

function bodyBytes(rawBody: unknown): Buffer | null {
  if (typeof rawBody === 'string') return Buffer.from(rawBody, 'utf8');
  if (rawBody instanceof Uint8Array) return Buffer.from(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
  return null;
}

/**
 * Verifies a Svc-Signature header against the raw request body (the exact bytes received,
 * never a re-serialized object). `v1` is the hex HMAC-SHA256, keyed with the whole
 * `whsec_` secret, of `<t>.<raw body>`; any `v1` value may match (two during a secret
 * rotation). Comparisons are constant-time. Never throws.
 */
export function verifyWebhook(
  rawBody: string | Buffer | Uint8Array,
  signatureHeader: string | null | undefined,
  secret: string | null | undefined,
  opts: VerifyWebhookOptions = {},
): VerifyWebhookResult {
  try {
    if (typeof secret !== 'string' || secret.length === 0) return { ok: false, reason: 'SECRET_MISSING' };
    if (typeof signatureHeader !== 'string' || signatureHeader.trim() === '') return { ok: false, reason: 'SIGNATURE_HEADER_MISSING' };
    const parsed = parseHeader(signatureHeader);
    if (!parsed) return { ok: false, reason: 'SIGNATURE_HEADER_MALFORMED' };
    const { t } = parsed;
    const tolerance =
      typeof opts.toleranceSecs === 'number' && Number.isFinite(opts.toleranceSecs) && opts.toleranceSecs >= 0 ? opts.toleranceSecs : DEFAULT_TOLERANCE_SECS;
    const now = typeof opts.now === 'number' && Number.isFinite(opts.now) ? opts.now : Date.now() / 1000;
    if (Math.abs(now - t) > tolerance) return { ok: false, reason: 'TIMESTAMP_OUT_OF_TOLERANCE', timestamp: t };
    const body = bodyBytes(rawBody);
    if (!body) return { ok: false, reason: 'SIGNATURE_MISMATCH', timestamp: t };
    const expected = Buffer.from(createHmac('sha256', secret).update(`${t}.`, 'utf8').update(body).digest('hex'), 'utf8');
    let match = false;
    for (const candidate of parsed.v1) {
      // Every candidate is compared (no early exit), each on equal-length buffers.
      if (timingSafeEqual(expected, Buffer.from(candidate, 'utf8'))) match = true;
    }
    return match ? { ok: true, timestamp: t } : { ok: false, reason: 'SIGNATURE_MISMATCH', timestamp: t };
  } catch {
    return { ok: false, reason: 'SIGNATURE_HEADER_MALFORMED' };
  }
}
