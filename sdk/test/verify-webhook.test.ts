import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { verifyWebhook } from '../src/index.js';

const SECRET = 'whsec_test_secret_0123456789abcdefghijklmnopqrstu';
const BODY = '{"id":"evt_01jxyz","type":"order.settled","created":1700000000,"livemode":false,"api_version":"v1","data":{"object":{"id":"ord_1","note":"caf\u00e9 \u2713"}}}';
const T = 1_700_000_000;

/** Computed here from section 6, independently of the server's signer. */
function v1(body: string | Buffer, t: number, secret = SECRET): string {
  return createHmac('sha256', secret).update(Buffer.concat([Buffer.from(`${t}.`), Buffer.isBuffer(body) ? body : Buffer.from(body)])).digest('hex');
}
const header = (t: number, ...sigs: string[]) => [`t=${t}`, ...sigs.map((s) => `v1=${s}`)].join(',');

describe('verifyWebhook', () => {
  it('accepts a valid signature over a string, a Buffer and a Uint8Array body', () => {
    const h = header(T, v1(BODY, T));
    expect(verifyWebhook(BODY, h, SECRET, { now: T })).toEqual({ ok: true, timestamp: T });
    expect(verifyWebhook(Buffer.from(BODY), h, SECRET, { now: T })).toEqual({ ok: true, timestamp: T });
    expect(verifyWebhook(new Uint8Array(Buffer.from(BODY)), h, SECRET, { now: T })).toEqual({ ok: true, timestamp: T });
  });

  it('verifies raw bytes, not a re-serialization', () => {
    const raw = Buffer.from('{ "id" : "evt_1",\n  "type": "order.settled" }');
    const h = header(T, v1(raw, T));
    expect(verifyWebhook(raw, h, SECRET, { now: T }).ok).toBe(true);
    expect(verifyWebhook(JSON.stringify(JSON.parse(raw.toString())), h, SECRET, { now: T }).reason).toBe('SIGNATURE_MISMATCH');
  });

  it('accepts any of several v1 values (secret rotation), in either order', () => {
    const oldSecret = 'whsec_old';
    const h1 = header(T, v1(BODY, T), v1(BODY, T, oldSecret));
    const h2 = header(T, v1(BODY, T, oldSecret), v1(BODY, T));
    for (const h of [h1, h2]) {
      expect(verifyWebhook(BODY, h, SECRET, { now: T }).ok).toBe(true);
      expect(verifyWebhook(BODY, h, oldSecret, { now: T }).ok).toBe(true);
      expect(verifyWebhook(BODY, h, 'whsec_third', { now: T })).toEqual({ ok: false, reason: 'SIGNATURE_MISMATCH', timestamp: T });
    }
  });

  it('ignores unknown schemes and whitespace around parts', () => {
    expect(verifyWebhook(BODY, ` t=${T} , v0=abc, v1=${v1(BODY, T)} `, SECRET, { now: T }).ok).toBe(true);
    expect(verifyWebhook(BODY, `t=${T},v1=${v1(BODY, T).toUpperCase()}`, SECRET, { now: T }).ok).toBe(true);
  });

  it('SECRET_MISSING for a null, undefined or empty secret', () => {
    const h = header(T, v1(BODY, T));
    for (const s of [null, undefined, '']) expect(verifyWebhook(BODY, h, s, { now: T })).toEqual({ ok: false, reason: 'SECRET_MISSING' });
  });

  it('SIGNATURE_HEADER_MISSING for a null, undefined, empty or blank header', () => {
    for (const h of [null, undefined, '', '   ']) expect(verifyWebhook(BODY, h, SECRET, { now: T })).toEqual({ ok: false, reason: 'SIGNATURE_HEADER_MISSING' });
  });

  it('SIGNATURE_HEADER_MALFORMED for headers that do not parse', () => {
    const sig = v1(BODY, T);
    for (const h of [
      'garbage',
      `v1=${sig}`,
      `t=${T}`,
      `t=${T},v0=${sig}`,
      `t=abc,v1=${sig}`,
      `t=-5,v1=${sig}`,
      `t=1.5,v1=${sig}`,
      `t=${T},t=${T},v1=${sig}`,
      `t=${T},v1=${sig.slice(1)}`,
      `t=${T},v1=${sig}zz`,
      `t=${T},v1=`,
      `t=${T},,v1=${sig}`,
      `t=${T};v1=${sig}`,
    ]) {
      expect(verifyWebhook(BODY, h, SECRET, { now: T }), h).toEqual({ ok: false, reason: 'SIGNATURE_HEADER_MALFORMED' });
    }
  });

  it('TIMESTAMP_OUT_OF_TOLERANCE beyond 300 s either way by default, at the edge still valid', () => {
    const h = header(T, v1(BODY, T));
    expect(verifyWebhook(BODY, h, SECRET, { now: T + 300 }).ok).toBe(true);
    expect(verifyWebhook(BODY, h, SECRET, { now: T - 300 }).ok).toBe(true);
    expect(verifyWebhook(BODY, h, SECRET, { now: T + 301 })).toEqual({ ok: false, reason: 'TIMESTAMP_OUT_OF_TOLERANCE', timestamp: T });
    expect(verifyWebhook(BODY, h, SECRET, { now: T - 301 })).toEqual({ ok: false, reason: 'TIMESTAMP_OUT_OF_TOLERANCE', timestamp: T });
  });

  it('honours toleranceSecs', () => {
    const h = header(T, v1(BODY, T));
    expect(verifyWebhook(BODY, h, SECRET, { now: T + 1000, toleranceSecs: 1000 }).ok).toBe(true);
    expect(verifyWebhook(BODY, h, SECRET, { now: T + 11, toleranceSecs: 10 }).reason).toBe('TIMESTAMP_OUT_OF_TOLERANCE');
    expect(verifyWebhook(BODY, h, SECRET, { now: T, toleranceSecs: 0 }).ok).toBe(true);
  });

  it('uses the clock when now is not given', () => {
    const t = Math.floor(Date.now() / 1000);
    expect(verifyWebhook(BODY, header(t, v1(BODY, t)), SECRET).ok).toBe(true);
    expect(verifyWebhook(BODY, header(T, v1(BODY, T)), SECRET).reason).toBe('TIMESTAMP_OUT_OF_TOLERANCE');
  });

  it('SIGNATURE_MISMATCH for a changed body, timestamp or secret', () => {
    const h = header(T, v1(BODY, T));
    expect(verifyWebhook(BODY + ' ', h, SECRET, { now: T })).toEqual({ ok: false, reason: 'SIGNATURE_MISMATCH', timestamp: T });
    expect(verifyWebhook(BODY, header(T + 1, v1(BODY, T)), SECRET, { now: T }).reason).toBe('SIGNATURE_MISMATCH');
    expect(verifyWebhook(BODY, h, `${SECRET}x`, { now: T }).reason).toBe('SIGNATURE_MISMATCH');
  });

  it('never throws, whatever it is given', () => {
    const h = header(T, v1(BODY, T));
    const weird: unknown[] = [undefined, null, 42, {}, { id: 'evt' }, [], Symbol('x')];
    for (const w of weird) {
      expect(() => verifyWebhook(w as string, h, SECRET, { now: T })).not.toThrow();
      expect(verifyWebhook(w as string, h, SECRET, { now: T }).ok).toBe(false);
      expect(() => verifyWebhook(BODY, w as string, SECRET, { now: T })).not.toThrow();
      expect(() => verifyWebhook(BODY, h, w as string, { now: T })).not.toThrow();
      expect(() => verifyWebhook(BODY, h, SECRET, w as never)).not.toThrow();
    }
    expect(verifyWebhook(BODY, h, SECRET, { now: Number.NaN, toleranceSecs: -1 }).reason).toBe('TIMESTAMP_OUT_OF_TOLERANCE');
  });
});
