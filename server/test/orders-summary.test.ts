import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Decision } from '@svc/contract';
import { publishedMerchant } from './helpers/agent.js';
import { openSession, settle } from './helpers/agent-protocol.js';
import { expectError } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { createEndpoint, Receiver, waitUntil } from './helpers/webhooks.js';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';

/**
 * GET /v1/orders/summary. Orders are reported through ingest with the injected clock pinned
 * to chosen times (ingest records any decision, total and currency); the summary is read with
 * the clock pinned to NOW. Held sessions come from the hosted checkout, failing endpoints from
 * real deliveries of test events to a local receiver.
 */
let app: TestApp;
let key: TestKey;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let other: Awaited<ReturnType<typeof publishedMerchant>>;
let holdShop: Awaited<ReturnType<typeof publishedMerchant>>;
let receiver: Receiver;
const workers: WebhookWorker[] = [];

/** 2026-03-15 03:00 UTC is 2026-03-14 20:00 in Los Angeles (PDT since 2026-03-08). */
const NOW = new Date('2026-03-15T03:00:00.000Z');
const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';

async function ingest(merchantId: string, at: string, decision: Decision, total: string, currency = 'USD', as: TestKey = key) {
  const realNow = app.services.now;
  app.services.now = () => new Date(at);
  try {
    const session = {
      id: `sess_ext_${randomUUID()}`,
      merchantId,
      agentId: randomUUID(),
      state: decision === 'accept' ? 'accepted' : decision === 'hold' ? 'held' : 'rejected',
      verdict: { decision, tier: 'standard', reasonCodes: ['OK'] },
      total: { currency, subtotal: total, tax: '0.00', total },
      lines: [{ sku: 'tea', qty: 1 }],
      railName: 'x402',
    };
    const res =
      decision === 'accept'
        ? await app.request('POST', '/v1/ingest/order', { key: as, body: { session, receipt: RECEIPT, settlement: { reference: '0xfeed', rail: 'x402' } } })
        : await app.request('POST', '/v1/ingest/decision', { key: as, body: { session } });
    if (res.status >= 300) throw new Error(`ingest: ${res.status} ${res.text}`);
  } finally {
    app.services.now = realNow;
  }
}

/** The summary as read at NOW (the injected clock). */
async function summary(query = '', as: TestKey = key) {
  const realNow = app.services.now;
  app.services.now = () => NOW;
  try {
    return await app.request('GET', `/v1/orders/summary${query}`, { key: as });
  } finally {
    app.services.now = realNow;
  }
}

const zeroDays = (from: string, to: string) => {
  const out: Record<string, { accepted_volume: string; accepted_count: number }> = {};
  for (let t = Date.parse(`${from}T00:00:00Z`); t <= Date.parse(`${to}T00:00:00Z`); t += 86_400_000) {
    out[new Date(t).toISOString().slice(0, 10)] = { accepted_volume: '0.00', accepted_count: 0 };
  }
  return out;
};
const daysOf = (expected: Record<string, { accepted_volume: string; accepted_count: number }>) =>
  Object.entries(expected).map(([date, v]) => ({ date, ...v }));

beforeAll(async () => {
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.00001' });
  receiver = await Receiver.start();
  const policy = { holdForReviewBelowTier: null, requireMandateOverUsd: null };
  shop = await publishedMerchant(app, { policy });
  key = shop.key;
  other = await publishedMerchant(app, { key, policy });
  holdShop = await publishedMerchant(app, { key, policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null } });

  const m = shop.merchant.id;
  await ingest(m, '2026-03-15T01:00:00Z', 'accept', '0.10');
  await ingest(m, '2026-03-15T02:00:00Z', 'accept', '0.20');
  await ingest(m, '2026-03-15T02:30:00Z', 'reject', '5.00');
  await ingest(other.merchant.id, '2026-03-15T01:30:00Z', 'accept', '50.00');
  await ingest(m, '2026-03-14T12:00:00Z', 'accept', '999999999999.99');
  await ingest(m, '2026-03-14T13:00:00Z', 'hold', '7.00');
  await ingest(m, '2026-03-10T09:00:00Z', 'accept', '1.12345678');
  // 07:30Z is 00:30 PDT on 03-09; 06:30Z is 23:30 PDT on 03-08 (a fixed -08:00 would put both on 03-08).
  await ingest(m, '2026-03-09T07:30:00Z', 'accept', '2.50');
  await ingest(m, '2026-03-09T06:30:00Z', 'accept', '3.00');
  // Counted as accepted, not as USDC volume.
  await ingest(m, '2026-03-08T12:00:00Z', 'accept', '4.00', 'EUR');
  await ingest(m, '2026-03-02T00:00:00Z', 'accept', '10.00');
  // 03-01 in UTC (outside the last 14 UTC days), 15:59 PST on 03-01 in Los Angeles (inside).
  await ingest(m, '2026-03-01T23:59:59Z', 'accept', '100.00');
  // Just after NOW: tomorrow in UTC is outside every window.
  await ingest(m, '2026-03-16T00:00:00Z', 'accept', '1000.00');
  // Another project's and the live mode's orders on the same day never count.
  const stranger = await app.key('test');
  const strangerShop = await app.request('POST', '/v1/merchants', { key: stranger, body: { slug: `st-${randomUUID().slice(0, 8)}`, name: 'S', domain: 's.example.com', receiving: { mock: { account: 'a' } } } });
  await ingest(strangerShop.body.id, '2026-03-15T01:00:00Z', 'accept', '70.00', 'USD', stranger);

  // Two hosted held sessions at holdShop; one is declined: one hold waits.
  for (const decline of [false, true]) {
    const s = await openSession(app, holdShop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expect((await settle(app, holdShop.base, s.id, { payment: { mock: true } })).status).toBe(202);
    if (decline) expect((await app.request('POST', `/v1/sessions/${s.id}/decline`, { key })).status).toBe(200);
  }
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await receiver?.close();
  await app?.stop();
});

describe('GET /v1/orders/summary', () => {
  it('GIVEN accepted, rejected and held orders across days WHEN read in UTC THEN today, the week and 14 zero-filled days carry exact decimal sums', async () => {
    const res = await summary();
    expect(res.status, res.text).toBe(200);
    const days = zeroDays('2026-03-02', '2026-03-15');
    days['2026-03-15'] = { accepted_volume: '50.30', accepted_count: 3 };
    days['2026-03-14'] = { accepted_volume: '999999999999.99', accepted_count: 1 };
    days['2026-03-10'] = { accepted_volume: '1.12345678', accepted_count: 1 };
    days['2026-03-09'] = { accepted_volume: '5.50', accepted_count: 2 };
    days['2026-03-08'] = { accepted_volume: '0.00', accepted_count: 1 };
    days['2026-03-02'] = { accepted_volume: '10.00', accepted_count: 1 };
    expect(res.body).toEqual({
      currency: 'USDC',
      today: { accepted_volume: '50.30', accepted_count: 3, orders_by_decision: { accept: 3, reject: 1, hold: 0 } },
      // 50.30 + 999999999999.99 + 1.12345678 + 5.50: a JavaScript number would print 1000000000056.9135.
      week: { accepted_volume: '1000000000056.91345678', accepted_count: 7, orders_by_decision: { accept: 7, reject: 1, hold: 1 } },
      days: daysOf(days),
      holds_waiting: 1,
      failing_endpoints: 0,
    });
  });

  it('GIVEN the same orders WHEN read in America/Los_Angeles THEN days follow the local calendar across the daylight-saving change', async () => {
    const res = await summary('?tz=America/Los_Angeles');
    expect(res.status, res.text).toBe(200);
    const days = zeroDays('2026-03-01', '2026-03-14');
    // Today in Los Angeles is 03-14: the 03-15 UTC orders (evening of 03-14 there) and 03-14's.
    days['2026-03-14'] = { accepted_volume: '1000000000050.29', accepted_count: 4 };
    days['2026-03-10'] = { accepted_volume: '1.12345678', accepted_count: 1 };
    days['2026-03-09'] = { accepted_volume: '2.50', accepted_count: 1 };
    days['2026-03-08'] = { accepted_volume: '3.00', accepted_count: 2 };
    days['2026-03-01'] = { accepted_volume: '110.00', accepted_count: 2 };
    expect(res.body.days).toEqual(daysOf(days));
    expect(res.body.today).toEqual({ accepted_volume: '1000000000050.29', accepted_count: 4, orders_by_decision: { accept: 4, reject: 1, hold: 1 } });
    expect(res.body.week).toEqual({ accepted_volume: '1000000000056.91345678', accepted_count: 8, orders_by_decision: { accept: 8, reject: 1, hold: 1 } });
  });

  it('GIVEN merchant_id WHEN read THEN only that merchant\'s orders and holds; another project\'s merchant is 404', async () => {
    const mine = await summary(`?merchant_id=${shop.merchant.id}`);
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body.today).toEqual({ accepted_volume: '0.30', accepted_count: 2, orders_by_decision: { accept: 2, reject: 1, hold: 0 } });
    expect(mine.body.days.at(-1)).toEqual({ date: '2026-03-15', accepted_volume: '0.30', accepted_count: 2 });
    expect(mine.body.holds_waiting).toBe(0);
    const theirs = await summary(`?merchant_id=${other.merchant.id}`);
    expect(theirs.body.today).toEqual({ accepted_volume: '50.00', accepted_count: 1, orders_by_decision: { accept: 1, reject: 0, hold: 0 } });
    expect(theirs.body.week.accepted_volume).toBe('50.00');
    expect((await summary(`?merchant_id=${holdShop.merchant.id}`)).body.holds_waiting).toBe(1);

    const stranger = await app.key('test');
    expectError(await summary(`?merchant_id=${shop.merchant.id}`, stranger), 404, 'NOT_FOUND');
  });

  it('GIVEN another project or the live mode WHEN read THEN none of these orders, holds or endpoints count', async () => {
    const live = await app.key('live', { projectId: key.projectId });
    const res = await summary('', live);
    expect(res.status, res.text).toBe(200);
    expect(res.body.today).toEqual({ accepted_volume: '0.00', accepted_count: 0, orders_by_decision: { accept: 0, reject: 0, hold: 0 } });
    expect(res.body.week.accepted_count).toBe(0);
    expect(res.body.days).toHaveLength(14);
    expect(res.body.days.every((d: any) => d.accepted_volume === '0.00' && d.accepted_count === 0)).toBe(true);
    expect(res.body.holds_waiting).toBe(0);
  });

  it('GIVEN a bad tz or an unknown parameter WHEN read THEN 400 VALIDATION_FAILED in the error shape; keys without orders:read are refused', async () => {
    for (const tz of ['Mars/Olympus', '%2B05:00', 'UTC%2B5', 'Europe/Paris%3Bdrop', '', 'x'.repeat(65)]) {
      const res = await summary(`?tz=${tz}`);
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, tz).toContain('query.tz');
    }
    expectError(await summary('?days=30'), 400, 'VALIDATION_FAILED');
    const noScope = await app.key('test', { projectId: key.projectId, scopes: ['webhooks:read'] });
    expectError(await summary('', noScope), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('GET', '/v1/orders/summary'), 401, 'UNAUTHENTICATED');
  });

  it('GIVEN endpoints whose latest attempt failed, whose delivery failed for good, that succeed, or are deleted WHEN read THEN failing_endpoints counts the first two kinds only; test events add no order', async () => {
    let recovering = false;
    receiver.respond = (hit) => (hit.path === '/ok' || (hit.path === '/recovered' && recovering) ? 200 : 500);
    // A failed attempt at a loopback receiver takes the whole attempt budget (lib/ssrf.ts): 1.5 s here, not 10.
    const fast = startWebhookWorker(app.services, { pollIntervalMs: 20, timeoutMs: 1_500 });
    workers.push(fast);
    const ok = await createEndpoint(app, key, receiver.url('/ok'));
    const bad = await createEndpoint(app, key, receiver.url('/bad'));
    const recovered = await createEndpoint(app, key, receiver.url('/recovered'));
    const gone = await createEndpoint(app, key, receiver.url('/gone'));
    const strangerKey = await app.key('test');
    const strangers = await createEndpoint(app, strangerKey, receiver.url('/stranger'));

    const sendTest = async (id: string, as: TestKey = key) => {
      const res = await app.request('POST', `/v1/webhooks/endpoints/${id}/test`, { key: as });
      expect(res.status, res.text).toBe(200);
      return res.body.event_id as string;
    };
    const deliveryOf = (eventId: string, as: TestKey = key) =>
      waitUntil(async () => {
        const d = (await app.request('GET', `/v1/events/${eventId}`, { key: as })).body.deliveries[0];
        return d && d.status !== 'pending' ? d : null;
      }, `delivery of ${eventId}`);

    // Seven failed attempts (the retry scale makes the schedule last under a second): failed for good.
    // The endpoints in parallel (the worker serves endpoints side by side), so the budgets overlap.
    await Promise.all(
      ([[ok.id, key], [bad.id, key], [recovered.id, key], [gone.id, key], [strangers.id, strangerKey]] as const).map(async ([id, as]) =>
        deliveryOf(await sendTest(id, as), as),
      ),
    );
    recovering = true;
    expect(await deliveryOf(await sendTest(recovered.id))).toMatchObject({ status: 'succeeded' });
    expect((await app.request('DELETE', `/v1/webhooks/endpoints/${gone.id}`, { key })).status).toBe(204);
    await fast.stop();

    // A first attempt that failed, its retry 30 s away (the documented schedule): failing, not failed.
    const slow = startWebhookWorker({ ...app.services, config: { ...app.services.config, SVC_WEBHOOK_RETRY_SCALE: 1 } }, { pollIntervalMs: 20, timeoutMs: 1_500 });
    workers.push(slow);
    const flaky = await createEndpoint(app, key, receiver.url('/flaky'));
    const flakyEvent = await sendTest(flaky.id);
    await waitUntil(async () => {
      const d = (await app.request('GET', `/v1/events/${flakyEvent}`, { key })).body.deliveries[0];
      return d.attempts.some((a: any) => a.status === 'failed') ? d : null;
    }, 'the flaky endpoint\'s first failed attempt');
    await slow.stop();

    const res = await summary();
    expect(res.status, res.text).toBe(200);
    // bad (failed for good, last attempt failed), recovered (a failed delivery, last attempt succeeded), flaky (last attempt failed).
    expect(res.body.failing_endpoints).toBe(3);
    // The seven test events changed no order figure.
    expect(res.body.today).toEqual({ accepted_volume: '50.30', accepted_count: 3, orders_by_decision: { accept: 3, reject: 1, hold: 0 } });
    expect(res.body.week.accepted_count).toBe(7);
    expect((await summary('', strangerKey)).body.failing_endpoints).toBe(1);
  });
});
