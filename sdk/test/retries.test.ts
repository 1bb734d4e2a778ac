import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SvcConnectionError, SvcRateLimitError, SvcServerError, type MerchantClient } from '../src/index.js';
import { computeRetryDelayMs, isRetryableStatus } from '../src/http.js';
import { parseRetryAfterMs } from '../src/errors.js';
import { TestApp, type TestKey } from '../../server/test/helpers/harness.js';
import { FlakyProxy, merchantClient, newMerchant, caught } from './helpers.js';

let app: TestApp;
let key: TestKey;
let proxy: FlakyProxy;
let svc: MerchantClient;

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  proxy = await FlakyProxy.start(app.baseUrl);
  svc = merchantClient(app, key, { baseUrl: proxy.url, maxRetries: 3 });
});
afterAll(async () => {
  await proxy?.stop();
  await app?.stop();
});

describe('retries through a flaky proxy', () => {
  it('GIVEN two 503s WHEN creating a merchant THEN the third attempt succeeds and all three carry the same Idempotency-Key', async () => {
    proxy.failNext(2, '503');
    const m = await svc.merchants.create(newMerchant());
    expect(m.id).toMatch(/^mrch_/);
    expect(proxy.requests.map((r) => r.outcome)).toEqual(['503', '503', 'forward']);
    const keys = new Set(proxy.requests.map((r) => r.idempotencyKey));
    expect(keys.size).toBe(1);
    expect([...keys][0]).toMatch(/^sdk_[0-9a-f-]{36}$/);
  });

  it('GIVEN the server processed the POST but the connection dropped before the answer WHEN the SDK retries THEN the replay returns the same object and nothing is created twice', async () => {
    const body = newMerchant();
    proxy.failNext(1, 'drop-after-forward');
    const m = await svc.merchants.create(body);
    expect(proxy.requests.map((r) => r.outcome)).toEqual(['drop-after-forward', 'forward']);
    expect(proxy.requests[0]!.idempotencyKey).toBe(proxy.requests[1]!.idempotencyKey);

    const all = await svc.merchants.list({ limit: 100 }).toArray({ max: 1000 });
    expect(all.filter((x) => x.slug === body.slug).map((x) => x.id)).toEqual([m.id]);
    expect(await svc.merchants.get(m.id)).toEqual(m);
  });

  it('GIVEN a caller-chosen Idempotency-Key and a dropped connection WHEN creating a product THEN every attempt sends that key', async () => {
    const m = await svc.merchants.create(newMerchant());
    proxy.failNext(2, 'drop');
    const item = await svc.catalog.create({ sku: 'latte', name: 'Latte', price: { amount: '5.00', currency: 'USD' } }, { merchant_id: m.id, idempotencyKey: 'my-key-1' });
    expect(item.sku).toBe('latte');
    expect(proxy.requests.map((r) => [r.outcome, r.idempotencyKey])).toEqual([
      ['drop', 'my-key-1'],
      ['drop', 'my-key-1'],
      ['forward', 'my-key-1'],
    ]);
  });

  it('GIVEN a 429 with Retry-After: 0 WHEN reading THEN the GET is retried and carries no Idempotency-Key', async () => {
    proxy.failNext(1, '429');
    const me = await svc.me.get();
    expect(me.key?.id).toBe(key.id);
    expect(proxy.requests.map((r) => [r.method, r.outcome, r.idempotencyKey])).toEqual([
      ['GET', '429', undefined],
      ['GET', 'forward', undefined],
    ]);
  });

  it('GIVEN an attempt that never answers WHEN the per-attempt timeout fires THEN the call is retried and succeeds', async () => {
    const quick = merchantClient(app, key, { baseUrl: proxy.url, maxRetries: 2, timeoutMs: 1500 });
    proxy.failNext(1, 'hang');
    const me = await quick.me.get();
    expect(me.livemode).toBe(false);
    // The hung attempt, then forwarded ones (a second timeout on a slow machine would add one more).
    const outcomes = proxy.requests.map((r) => r.outcome);
    expect(outcomes[0]).toBe('hang');
    expect(outcomes.slice(1).length).toBeGreaterThanOrEqual(1);
    expect(new Set(outcomes.slice(1))).toEqual(new Set(['forward']));
  });

  it('GIVEN more failures than retries WHEN calling THEN the typed error of the last answer is thrown after 1 + maxRetries attempts', async () => {
    const two = merchantClient(app, key, { baseUrl: proxy.url, maxRetries: 2 });
    proxy.failNext(5, '503');
    const err = await caught(two.merchants.create(newMerchant()));
    expect(err).toBeInstanceOf(SvcServerError);
    expect((err as SvcServerError).status).toBe(503);
    expect((err as SvcServerError).reasonCodes).toEqual(['DATABASE_UNAVAILABLE']);
    expect(proxy.requests).toHaveLength(3);

    proxy.failNext(1, '429');
    const rl = await caught(merchantClient(app, key, { baseUrl: proxy.url, maxRetries: 0 }).me.get());
    expect(rl).toBeInstanceOf(SvcRateLimitError);
    expect((rl as SvcRateLimitError).retryAfter).toBe(0);
    expect(proxy.requests).toHaveLength(1);

    proxy.failNext(5, 'drop');
    const conn = await caught(merchantClient(app, key, { baseUrl: proxy.url, maxRetries: 1 }).me.get());
    expect(conn).toBeInstanceOf(SvcConnectionError);
    expect((conn as SvcConnectionError).details.attempts).toBe(2);
    expect(proxy.requests).toHaveLength(2);
  });

  it('GIVEN a 4xx WHEN calling THEN it is not retried', async () => {
    proxy.failNext(0, '503');
    const m = await svc.merchants.create(newMerchant());
    proxy.failNext(0, '503');
    await caught(svc.merchants.create(newMerchant({ slug: m.slug })));
    expect(proxy.requests).toHaveLength(1);
  });
});

describe('backoff schedule', () => {
  it('GIVEN no Retry-After WHEN computing delays THEN they grow exponentially within the jitter band and cap at 8 s', () => {
    const low = () => 0;
    const high = () => 1;
    expect([0, 1, 2, 3, 4, 5].map((n) => computeRetryDelayMs(n, null, low))).toEqual([250, 500, 1000, 2000, 4000, 4000]);
    expect([0, 1, 2, 3, 4, 5].map((n) => computeRetryDelayMs(n, null, high))).toEqual([500, 1000, 2000, 4000, 8000, 8000]);
  });

  it('GIVEN a Retry-After header WHEN computing the delay THEN it is honoured (seconds or HTTP date), and one over 60 s stops retrying', () => {
    expect(computeRetryDelayMs(0, '2', () => 0.5)).toBe(2000);
    expect(computeRetryDelayMs(3, '0', () => 0.5)).toBe(0);
    expect(computeRetryDelayMs(0, '120', () => 0.5)).toBeNull();
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(parseRetryAfterMs('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5000);
    expect(parseRetryAfterMs('soon', now)).toBeNull();
  });

  it('GIVEN statuses WHEN deciding to retry THEN only 429, 5xx and an in-progress idempotency key are retried', () => {
    expect([400, 401, 403, 404, 409, 422, 429, 500, 502, 503].filter((s) => isRetryableStatus(s, {}))).toEqual([429, 500, 502, 503]);
    expect(isRetryableStatus(409, { reason_codes: ['IDEMPOTENCY_KEY_IN_PROGRESS'], error_human: '' })).toBe(true);
    expect(isRetryableStatus(409, { reason_codes: ['IDEMPOTENCY_KEY_REUSED'], error_human: '' })).toBe(false);
  });
});
