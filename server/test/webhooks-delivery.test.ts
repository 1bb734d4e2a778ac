import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@svc/sdk';
import { openOrm } from '../src/db/orm.js';
import { entities } from '../src/entities.js';
import type { Services } from '../src/services.js';
import { startWebhookWorker, type WebhookWorker, type WebhookWorkerOptions } from '../src/modules/webhooks/worker.js';
import { NON_PUBLIC_FAILURE } from '../src/modules/webhooks/deliver.js';
import { onPostgres, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { createEndpoint, orderObject, Receiver, recordEvents, waitUntil } from './helpers/webhooks.js';

/**
 * Real deliveries: a node:http receiver in this process, workers claiming from the
 * database. The retry scale shrinks the section 6 schedule (24 h -> under a second).
 */
let app: TestApp;
let receiver: Receiver;
const workers: WebhookWorker[] = [];
const extraServices: Services[] = [];

beforeAll(async () => {
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.00001' });
  receiver = await Receiver.start();
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  receiver.respond = () => 200;
});
afterAll(async () => {
  await receiver?.close();
  for (const s of extraServices) await s.orm.close(true);
  await app?.stop();
});

/**
 * A failed attempt at a loopback receiver takes the whole attempt budget (no port state in the
 * record or its timing, lib/ssrf.ts), so these workers get 3 s instead of 10 s: failures left
 * over from earlier tests then hold a graceful stop for at most that long.
 */
function worker(opts: WebhookWorkerOptions = {}, services: Services = app.services): WebhookWorker {
  const w = startWebhookWorker(services, { pollIntervalMs: 20, timeoutMs: 3_000, ...opts });
  workers.push(w);
  return w;
}

async function eventDetail(key: TestKey, id: string) {
  const res = await app.request('GET', `/v1/events/${id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body;
}

/** Barrier: the delivery of `eventId` to `endpointId` has left `pending` (or has `n` finished attempts). */
async function settledDelivery(key: TestKey, eventId: string, endpointId: string, until: (d: any) => boolean = (d) => d.status !== 'pending') {
  return waitUntil(async () => {
    const d = (await eventDetail(key, eventId)).deliveries.find((x: any) => x.endpoint_id === endpointId);
    return d && until(d) ? d : null;
  }, `delivery of ${eventId} to ${endpointId}`);
}

let pathSeq = 0;
const newPath = () => `/r${++pathSeq}`;

describe('webhook delivery', () => {
  it('delivers both events of a settle in enqueue order, signed over the raw bytes, with the documented headers and envelope', async () => {
    // GIVEN an endpoint and an accepted settle's two events recorded in one transaction
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    const merchant = await app.request('POST', '/v1/merchants', { key, body: { slug: `s-${Date.now()}`, name: 'S', domain: 's.example.com', receiving: { mock: { account: 'a' } } } });
    const object = orderObject(merchant.body.id ?? 'mrch_00000000000000000000000000');
    const [accepted, settled] = await recordEvents(app, key, ['order.accepted', 'order.settled'], object);
    // WHEN a worker runs
    worker();
    const hits = await receiver.waitForHits(2, path);
    // THEN both arrived, accepted first, each verifiable on its raw bytes
    expect(hits.map((h) => h.headers['svc-event-id'])).toEqual([accepted!.id, settled!.id]);
    for (const [i, h] of hits.entries()) {
      const ev = [accepted!, settled!][i]!;
      expect(h.headers['content-type']).toBe('application/json');
      expect(h.headers['user-agent']).toBe('Svc-Checkout-Webhooks/1');
      expect(h.headers['svc-delivery-id']).toMatch(/^wha_[0-9a-z]{26}$/);
      const sig = String(h.headers['svc-signature']);
      expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
      const v = verifyWebhook(h.raw, sig, ep.secret);
      expect(v).toEqual({ ok: true, timestamp: Number(/^t=(\d+)/.exec(sig)![1]) });
      expect(verifyWebhook(h.raw.toString('utf8') + ' ', sig, ep.secret).reason).toBe('SIGNATURE_MISMATCH');
      const body = JSON.parse(h.raw.toString('utf8'));
      expect(body).toEqual({ id: ev.id, type: ev.type, created: ev.created, livemode: false, api_version: 'v1', data: { object } });
      expect(body.id).toMatch(/^evt_/);
      expect(Number.isInteger(body.created)).toBe(true);
    }
    // AND the attempts are recorded and the endpoint is enabled
    const d = await settledDelivery(key, settled!.id, ep.id);
    expect(d).toMatchObject({ status: 'succeeded', attempt_count: 1, next_attempt_at: null });
    expect(d.attempts).toEqual([
      expect.objectContaining({ id: hits[1]!.headers['svc-delivery-id'], attempt_number: 1, status: 'succeeded', response_status: 200, error: null }),
    ]);
    expect(d.attempts[0].duration_ms).toEqual(expect.any(Number));
    expect((await app.request('GET', `/v1/webhooks/endpoints/${ep.id}`, { key })).body.status).toBe('enabled');
  });

  it('retries a failing receiver with identical body bytes and a new delivery id per attempt', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path && receiver.on(path).length <= 2 ? 500 : 200);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker();
    const hits = await receiver.waitForHits(3, path);
    expect(hits[2]!.raw.equals(hits[0]!.raw)).toBe(true);
    expect(hits[1]!.raw.equals(hits[0]!.raw)).toBe(true);
    expect(new Set(hits.map((h) => h.headers['svc-delivery-id'])).size).toBe(3);
    expect(new Set(hits.map((h) => h.headers['svc-event-id']))).toEqual(new Set([ev!.id]));
    for (const h of hits) expect(verifyWebhook(h.raw, String(h.headers['svc-signature']), ep.secret).ok).toBe(true);
    const d = await settledDelivery(key, ev!.id, ep.id);
    expect(d.status).toBe('succeeded');
    expect(d.attempt_count).toBe(3);
    // A loopback receiver's failures carry no status (docs/webhooks.md "What an attempt records").
    expect(d.attempts.map((a: any) => [a.attempt_number, a.status, a.response_status, a.id])).toEqual([
      [1, 'failed', null, hits[0]!.headers['svc-delivery-id']],
      [2, 'failed', null, hits[1]!.headers['svc-delivery-id']],
      [3, 'succeeded', 200, hits[2]!.headers['svc-delivery-id']],
    ]);
    expect(d.attempts[0].error).toBe(NON_PUBLIC_FAILURE);
  });

  it('fails permanently after the seventh failed attempt', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path ? 503 : 200);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker({ timeoutMs: 1_500 });
    const d = await settledDelivery(key, ev!.id, ep.id);
    expect(d).toMatchObject({ status: 'failed', attempt_count: 7, next_attempt_at: null });
    expect(d.attempts.map((a: any) => a.attempt_number)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(d.attempts.every((a: any) => a.status === 'failed' && a.response_status === null && a.error === NON_PUBLIC_FAILURE)).toBe(true);
    expect(receiver.on(path)).toHaveLength(7);
    expect(new Set(receiver.on(path).map((h) => h.raw.toString('hex'))).size).toBe(1);
    const [row] = await sql(app, 'select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = ?', [ep.id, 'pending']);
    expect(Number(row!.n)).toBe(0);
    // No attempt ran before its slot: attempt k starts at least schedule[k-1] x scale after enqueue.
    const starts = await sql(
      app,
      `select a.attempt_number, extract(epoch from (a.created_at - d.enqueued_at)) * 1000 as after_ms
       from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id where d.event_id = ? order by a.attempt_number`,
      [ev!.id],
    );
    const schedule = [0, 30_000, 120_000, 600_000, 3_600_000, 21_600_000, 86_400_000];
    // The scale is 0.00001: divide (exact here) rather than multiply (21_600_000 * 0.00001 is 216.00000000000003 in floating point).
    for (const r of starts) expect(Number(r.after_ms)).toBeGreaterThanOrEqual(schedule[Number(r.attempt_number) - 1]! / 100_000);
  });

  it('records connection errors as failed attempts', async () => {
    const key = await app.key('test');
    const closed = await Receiver.start();
    const url = closed.url('/gone');
    await closed.close();
    const ep = await createEndpoint(app, key, url);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker({ timeoutMs: 1_000 });
    const d = await settledDelivery(key, ev!.id, ep.id, (x) => x.attempts.length >= 1 && x.attempts[0].status === 'failed');
    // At a loopback address the record does not say the port is closed (no ECONNREFUSED).
    expect(d.attempts[0]).toMatchObject({ status: 'failed', response_status: null, duration_ms: 1_000, error: NON_PUBLIC_FAILURE });
    // Its retries would hold later tests' workers for a budget each.
    await app.request('PATCH', `/v1/webhooks/endpoints/${ep.id}`, { key, body: { disabled: true } });
  });

  it('sends nothing to a disabled endpoint while the event is still recorded and listed', async () => {
    const key = await app.key('test');
    const onPath = newPath();
    const offPath = newPath();
    const on = await createEndpoint(app, key, receiver.url(onPath));
    const off = await createEndpoint(app, key, receiver.url(offPath));
    expect((await app.request('PATCH', `/v1/webhooks/endpoints/${off.id}`, { key, body: { disabled: true } })).status).toBe(200);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker();
    await receiver.waitForHits(1, onPath);
    await settledDelivery(key, ev!.id, on.id);
    expect(receiver.on(offPath)).toHaveLength(0);
    const list = await app.request('GET', '/v1/events', { key });
    expect(list.body.data.map((e: any) => e.id)).toContain(ev!.id);
    expect((await eventDetail(key, ev!.id)).deliveries.map((d: any) => d.endpoint_id)).toEqual([on.id]);
  });

  it('cancels pending deliveries of an endpoint disabled after enqueue', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    const [ev] = await recordEvents(app, key, ['order.settled']);
    await app.request('PATCH', `/v1/webhooks/endpoints/${ep.id}`, { key, body: { disabled: true } });
    const barrier = newPath();
    const other = await createEndpoint(app, key, receiver.url(barrier));
    const [ev2] = await recordEvents(app, key, ['order.settled']);
    worker();
    await settledDelivery(key, ev2!.id, other.id);
    expect(receiver.on(path)).toHaveLength(0);
    expect((await eventDetail(key, ev!.id)).deliveries).toEqual([expect.objectContaining({ endpoint_id: ep.id, status: 'canceled', attempts: [] })]);
  });

  it('delivers only the types in enabled_events', async () => {
    const key = await app.key('test');
    const settledPath = newPath();
    const allPath = newPath();
    await createEndpoint(app, key, receiver.url(settledPath), ['order.settled']);
    await createEndpoint(app, key, receiver.url(allPath), ['*']);
    const [accepted, settled, held] = await recordEvents(app, key, ['order.accepted', 'order.settled', 'order.held']);
    worker();
    const all = await receiver.waitForHits(3, allPath);
    expect(all.map((h) => h.headers['svc-event-id'])).toEqual([accepted!.id, settled!.id, held!.id]);
    const only = await receiver.waitForHits(1, settledPath);
    expect(only.map((h) => h.headers['svc-event-id'])).toEqual([settled!.id]);
    const [row] = await sql(app, 'select count(*)::int as n from webhook_deliveries d join webhook_endpoints e on e.id = d.endpoint_id where e.url = ?', [
      receiver.url(settledPath),
    ]);
    expect(Number(row!.n)).toBe(1);
  });

  it('signs with both secrets during a rotation', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    const rot = await app.request('POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, { key });
    await recordEvents(app, key, ['order.settled']);
    worker();
    const [hit] = await receiver.waitForHits(1, path);
    const sig = String(hit!.headers['svc-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verifyWebhook(hit!.raw, sig, rot.body.secret).ok).toBe(true);
    expect(verifyWebhook(hit!.raw, sig, ep.secret).ok).toBe(true);
    expect(verifyWebhook(hit!.raw, sig, 'whsec_someone_else').reason).toBe('SIGNATURE_MISMATCH');
  });

  it('stops signing with the old secret once the overlap has passed', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    const rot = await app.request('POST', `/v1/webhooks/endpoints/${ep.id}/rotate-secret`, { key });
    await sql(app, "update webhook_endpoints set previous_secret_expires_at = now() - interval '1 second' where id = ?", [ep.id]);
    await recordEvents(app, key, ['order.settled']);
    worker();
    const [hit] = await receiver.waitForHits(1, path);
    const sig = String(hit!.headers['svc-signature']);
    expect(sig).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyWebhook(hit!.raw, sig, rot.body.secret).ok).toBe(true);
    expect(verifyWebhook(hit!.raw, sig, ep.secret).reason).toBe('SIGNATURE_MISMATCH');
  });

  it('replays an event with the same bytes and event id', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker();
    const [first] = await receiver.waitForHits(1, path);
    const rep = await app.request('POST', `/v1/events/${ev!.id}/replay`, { key });
    expect(rep.body.deliveries).toEqual([{ endpoint_id: ep.id, status: 'pending' }]);
    const hits = await receiver.waitForHits(2, path);
    expect(hits[1]!.raw.equals(first!.raw)).toBe(true);
    expect(hits[1]!.headers['svc-event-id']).toBe(ev!.id);
    expect(hits[1]!.headers['svc-delivery-id']).not.toBe(first!.headers['svc-delivery-id']);
  });

  it('schedules the next attempt from enqueue per the section 6 table times the retry scale', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path ? 500 : 200);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    // A worker at scale 1: after the first failure the second attempt is due 30 s after enqueue.
    worker({}, { ...app.services, config: { ...app.services.config, SVC_WEBHOOK_RETRY_SCALE: 1 } });
    const d = await settledDelivery(key, ev!.id, ep.id, (x) => x.attempt_count >= 1);
    expect(d.status).toBe('pending');
    expect(Date.parse(d.next_attempt_at) - Date.parse(d.created_at)).toBe(30_000);
    const [row] = await sql(app, 'select extract(epoch from (next_attempt_at - enqueued_at)) * 1000 as ms from webhook_deliveries where event_id = ?', [ev!.id]);
    expect(Number(row!.ms)).toBe(30_000);
    await app.request('PATCH', `/v1/webhooks/endpoints/${ep.id}`, { key, body: { disabled: true } });
  });

  it('disables an endpoint whose failures started more than five days ago, and a success clears the clock', async () => {
    const key = await app.key('test');
    const badPath = newPath();
    const goodPath = newPath();
    const bad = await createEndpoint(app, key, receiver.url(badPath));
    const good = await createEndpoint(app, key, receiver.url(goodPath));
    receiver.respond = (h) => (h.path === badPath ? 500 : 200);
    await sql(app, "update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id in (?)", [[bad.id, good.id]]);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker();
    const d = await settledDelivery(key, ev!.id, bad.id);
    expect(d.status).toBe('canceled');
    expect(d.attempts).toHaveLength(1);
    const badNow = (await app.request('GET', `/v1/webhooks/endpoints/${bad.id}`, { key })).body;
    expect(badNow).toMatchObject({ status: 'disabled', disabled_reason: 'failing' });
    await settledDelivery(key, ev!.id, good.id);
    const [g] = await sql(app, 'select status, failing_since from webhook_endpoints where id = ?', [good.id]);
    expect(g).toMatchObject({ status: 'enabled', failing_since: null });
  });

  it('keeps a young failure streak enabled', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path ? 500 : 200);
    await sql(app, "update webhook_endpoints set failing_since = now() - interval '4 days' where id = ?", [ep.id]);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker({ timeoutMs: 1_000 });
    await settledDelivery(key, ev!.id, ep.id);
    expect((await app.request('GET', `/v1/webhooks/endpoints/${ep.id}`, { key })).body.status).toBe('pending');
  });

  it('leaves deliveries waiting when an endpoint secret cannot be opened, and delivers the rest', async () => {
    const key = await app.key('test');
    const badPath = newPath();
    const goodPath = newPath();
    const bad = await createEndpoint(app, key, receiver.url(badPath));
    const good = await createEndpoint(app, key, receiver.url(goodPath));
    // Sealed for another endpoint id: the AES-GCM tag check fails, as with a changed master key.
    await sql(app, 'update webhook_endpoints set secret_sealed = ? where id = ?', [app.services.box.seal('whsec_x', good.id), bad.id]);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    worker();
    await settledDelivery(key, ev!.id, good.id);
    const d = (await eventDetail(key, ev!.id)).deliveries.find((x: any) => x.endpoint_id === bad.id);
    expect(d).toMatchObject({ status: 'pending', attempt_count: 0, attempts: [] });
    expect(receiver.on(badPath)).toHaveLength(0);
  });

  it('refuses a live endpoint whose host resolves to a loopback address at delivery time', async () => {
    const live = await app.key('live');
    const ep = await createEndpoint(app, live, 'https://hooks.example.com/svc');
    // The name now points somewhere private (as a DNS change would): the delivery is refused and recorded.
    await sql(app, 'update webhook_endpoints set url = ? where id = ?', [`https://localhost:${receiver.port}/live`, ep.id]);
    const ip = await createEndpoint(app, live, 'https://93.184.216.34/x');
    await sql(app, 'update webhook_endpoints set url = ? where id = ?', [`http://127.0.0.1:${receiver.port}/live-ip`, ip.id]);
    const [ev] = await recordEvents(app, live, ['order.settled']);
    worker();
    const byName = await settledDelivery(live, ev!.id, ep.id, (d) => d.attempts.length >= 1 && d.attempts[0].status === 'failed');
    expect(byName.attempts[0].error).toBe('refused: the host is not a public address');
    const byIp = await settledDelivery(live, ev!.id, ip.id, (d) => d.attempts.length >= 1 && d.attempts[0].status === 'failed');
    expect(byIp.attempts[0].error).toBe('refused: the host is not a public address');
    expect(receiver.on('/live')).toHaveLength(0);
    expect(receiver.on('/live-ip')).toHaveLength(0);
  });
});

describe('workers on one database', () => {
  it('two workers deliver each attempt exactly once', async () => {
    const key = await app.key('test');
    const paths = [newPath(), newPath(), newPath()];
    const eps: Array<{ id: string }> = [];
    for (const p of paths) eps.push(await createEndpoint(app, key, receiver.url(p)));
    // On PostgreSQL the second worker gets its own ORM and pool, as a second server would.
    let second = app.services;
    if (onPostgres) {
      const url = app.services.orm.config.get('clientUrl') as string;
      second = { ...app.services, orm: await openOrm({ kind: 'postgres', url, poolMax: 5 }, entities) };
      extraServices.push(second);
    }
    worker({ name: 'w1', batchSize: 5 });
    worker({ name: 'w2', batchSize: 5 }, second);
    const N = 40;
    const events: unknown[] = [];
    for (let i = 0; i < N; i++) events.push(...(await recordEvents(app, key, ['order.settled'])));
    for (const p of paths) await receiver.waitForHits(N, p);
    await waitUntil(async () => {
      const [r] = await sql(app, "select count(*)::int as n from webhook_deliveries where endpoint_id in (?) and status = 'succeeded'", [eps.map((e) => e.id)]);
      return Number(r!.n) === N * paths.length;
    }, 'all deliveries recorded');
    for (const p of paths) {
      const hits = receiver.on(p);
      expect(hits).toHaveLength(N);
      expect(new Set(hits.map((h) => h.headers['svc-event-id'])).size).toBe(N);
    }
    const all = paths.flatMap((p) => receiver.on(p));
    expect(new Set(all.map((h) => h.headers['svc-delivery-id'])).size).toBe(N * paths.length);
    const [attempts] = await sql(app, 'select count(*)::int as n, count(distinct delivery_id)::int as d from webhook_attempts where endpoint_id in (?)', [
      eps.map((e) => e.id),
    ]);
    expect(Number(attempts!.n)).toBe(N * paths.length);
    expect(Number(attempts!.d)).toBe(N * paths.length);
    const owners = await sql(app, 'select 1 from webhook_deliveries where lock_owner is not null and endpoint_id in (?)', [eps.map((e) => e.id)]);
    expect(owners).toEqual([]);
    expect(events).toHaveLength(N);
  });

  it('a worker killed mid-delivery loses nothing: another worker sends the attempt after the lease', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path && receiver.on(path).length === 1 ? 'hang' : 200);
    const [ev] = await recordEvents(app, key, ['order.settled']);
    const first = worker({ name: 'doomed', leaseMs: 1_000 });
    await receiver.waitForHits(1, path);
    await first.kill();
    worker({ name: 'survivor' });
    const hits = await receiver.waitForHits(2, path);
    expect(hits[1]!.raw.equals(hits[0]!.raw)).toBe(true);
    expect(hits[1]!.headers['svc-event-id']).toBe(ev!.id);
    expect(hits[1]!.headers['svc-delivery-id']).not.toBe(hits[0]!.headers['svc-delivery-id']);
    const d = await settledDelivery(key, ev!.id, ep.id);
    expect(d.status).toBe('succeeded');
    expect(d.attempts.map((a: any) => [a.id, a.attempt_number, a.status])).toEqual([
      [hits[0]!.headers['svc-delivery-id'], 1, 'lost'],
      [hits[1]!.headers['svc-delivery-id'], 1, 'succeeded'],
    ]);
  });

  it('a gracefully stopped worker hands back claims it never sent', async () => {
    const key = await app.key('test');
    const path = newPath();
    const ep = await createEndpoint(app, key, receiver.url(path));
    receiver.respond = (h) => (h.path === path && receiver.on(path).length === 1 ? 'hang' : 200);
    const events = await recordEvents(app, key, ['order.accepted', 'order.settled']);
    const w = worker({ name: 'graceful', timeoutMs: 500 });
    await receiver.waitForHits(1, path);
    await w.stop();
    // The first attempt timed out and was recorded; the second was never sent and is claimable at once.
    const first = await eventDetail(key, events[0]!.id);
    expect(first.deliveries[0].attempts).toEqual([expect.objectContaining({ status: 'failed', error: NON_PUBLIC_FAILURE, duration_ms: 500 })]);
    const second = await eventDetail(key, events[1]!.id);
    expect(second.deliveries[0]).toMatchObject({ status: 'pending', attempt_count: 0, attempts: [] });
    const [row] = await sql(app, 'select lock_owner from webhook_deliveries where event_id = ? and endpoint_id = ?', [events[1]!.id, ep.id]);
    expect(row!.lock_owner).toBeNull();
    worker();
    await settledDelivery(key, events[1]!.id, ep.id);
  });
});
