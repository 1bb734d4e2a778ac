import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@svc/sdk';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { expectError } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { createEndpoint, orderObject, Receiver, recordEvents, waitUntil } from './helpers/webhooks.js';

/**
 * POST /v1/webhooks/endpoints/{id}/test: a webhook_endpoint.test event, delivered to that one
 * endpoint through the queue (a real worker, a real receiver on 127.0.0.1), listed with the
 * other events. The retry scale shrinks the section 6 schedule to under a second.
 */
let app: TestApp;
let receiver: Receiver;
let worker: WebhookWorker;

beforeAll(async () => {
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.00001' });
  receiver = await Receiver.start();
  // A failed attempt at a loopback receiver takes the whole attempt budget (lib/ssrf.ts): 3 s here, not 10.
  worker = startWebhookWorker(app.services, { pollIntervalMs: 20, timeoutMs: 3_000 });
});
afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await app?.stop();
});

let pathSeq = 0;
const newPath = () => `/t${++pathSeq}`;

const sendTest = (key: TestKey, id: string, headers: Record<string, string> = {}) => app.request('POST', `/v1/webhooks/endpoints/${id}/test`, { key, headers });

/** Barrier: the event's delivery to the endpoint has left `pending`. */
const finishedDelivery = (key: TestKey, eventId: string, endpointId: string) =>
  waitUntil(async () => {
    const d = (await app.request('GET', `/v1/events/${eventId}`, { key })).body.deliveries?.find((x: any) => x.endpoint_id === endpointId);
    return d && d.status !== 'pending' ? d : null;
  }, `delivery of ${eventId} to ${endpointId}`);

describe('POST /v1/webhooks/endpoints/{id}/test', () => {
  it('GIVEN three endpoints, the target subscribed to order.settled only WHEN a test is sent to it THEN it alone receives one signed webhook_endpoint.test event naming it', async () => {
    const key = await app.key('test');
    const [pTarget, pAll, pSettled] = [newPath(), newPath(), newPath()];
    const target = await createEndpoint(app, key, receiver.url(pTarget), ['order.settled']);
    const all = await createEndpoint(app, key, receiver.url(pAll), ['*']);
    await createEndpoint(app, key, receiver.url(pSettled), ['order.settled']);

    const res = await sendTest(key, target.id);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ event_id: expect.stringMatching(/^evt_[0-9a-z]{26}$/), deliveries: [{ endpoint_id: target.id, status: 'pending' }] });

    const [hit] = await receiver.waitForHits(1, pTarget);
    expect(hit!.headers['svc-event-id']).toBe(res.body.event_id);
    expect(hit!.headers['svc-delivery-id']).toMatch(/^wha_/);
    expect(verifyWebhook(hit!.raw, String(hit!.headers['svc-signature']), target.secret).ok).toBe(true);
    expect(verifyWebhook(hit!.raw, String(hit!.headers['svc-signature']), all.secret).ok).toBe(false);
    const body = JSON.parse(hit!.raw.toString('utf8'));
    expect(body).toEqual({
      id: res.body.event_id,
      type: 'webhook_endpoint.test',
      created: expect.any(Number),
      livemode: false,
      api_version: 'v1',
      data: { object: { id: target.id, object: 'webhook_endpoint', url: receiver.url(pTarget) } },
    });

    // Barrier: an order event afterwards reaches every endpoint; by then the test event would
    // have reached the others too, had it been sent to them. It was not.
    const [order] = await recordEvents(app, key, ['order.settled'], orderObject('mrch_00000000000000000000000000'));
    await receiver.waitForHits(1, pAll);
    await receiver.waitForHits(1, pSettled);
    await receiver.waitForHits(2, pTarget);
    for (const p of [pAll, pSettled]) expect(receiver.on(p).map((h) => h.headers['svc-event-id']), p).toEqual([order!.id]);
    expect(receiver.on(pTarget).map((h) => h.headers['svc-event-id'])).toEqual([res.body.event_id, order!.id]);
  });

  it('GIVEN a sent test WHEN events are read THEN it is listed (also by type), and its detail shows the one delivery with its attempts; replay sends it to that endpoint only', async () => {
    const key = await app.key('test');
    const p = newPath();
    const bystander = newPath();
    receiver.respond = (h) => (h.path === p && receiver.on(p).length === 1 ? 500 : 200);
    const ep = await createEndpoint(app, key, receiver.url(p));
    await createEndpoint(app, key, receiver.url(bystander));
    const sent = (await sendTest(key, ep.id)).body;

    const d = await finishedDelivery(key, sent.event_id, ep.id);
    const detail = (await app.request('GET', `/v1/events/${sent.event_id}`, { key })).body;
    expect(detail).toMatchObject({ id: sent.event_id, type: 'webhook_endpoint.test', data: { object: { id: ep.id, object: 'webhook_endpoint' } } });
    expect(detail.deliveries).toHaveLength(1);
    // A first 500, then the retry of the normal schedule succeeds. A loopback receiver's failure carries no status.
    expect(d).toMatchObject({ endpoint_id: ep.id, status: 'succeeded', replay: false, attempt_count: 2 });
    expect(d.attempts.map((a: any) => [a.attempt_number, a.status, a.response_status])).toEqual([
      [1, 'failed', null],
      [2, 'succeeded', 200],
    ]);

    const listed = await app.request('GET', '/v1/events', { key });
    expect(listed.body.data.map((e: any) => e.id)).toEqual([sent.event_id]);
    expect(listed.body.data[0]).toEqual({ id: sent.event_id, type: 'webhook_endpoint.test', created: expect.any(Number), livemode: false, api_version: 'v1', data: { object: { id: ep.id, object: 'webhook_endpoint', url: receiver.url(p) } } });
    expect((await app.request('GET', '/v1/events?type=webhook_endpoint.test', { key })).body.data.map((e: any) => e.id)).toEqual([sent.event_id]);
    expect((await app.request('GET', '/v1/events?type=order.settled', { key })).body.data).toEqual([]);

    const replay = await app.request('POST', `/v1/events/${sent.event_id}/replay`, { key });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body).toEqual({ event_id: sent.event_id, deliveries: [{ endpoint_id: ep.id, status: 'pending' }] });
    await receiver.waitForHits(3, p);
    const again = (await app.request('GET', `/v1/events/${sent.event_id}`, { key })).body.deliveries;
    expect(again.map((x: any) => [x.endpoint_id, x.replay])).toEqual([
      [ep.id, false],
      [ep.id, true],
    ]);
    expect(receiver.on(bystander)).toEqual([]);
    expect(receiver.on(p)[2]!.raw.equals(receiver.on(p)[0]!.raw)).toBe(true);
  });

  it('GIVEN test events WHEN the orders summary and feed are read THEN no order exists and nothing is counted', async () => {
    const key = await app.key('test');
    const ep = await createEndpoint(app, key, receiver.url(newPath()));
    const sent = (await sendTest(key, ep.id)).body;
    await finishedDelivery(key, sent.event_id, ep.id);
    const summary = await app.request('GET', '/v1/orders/summary', { key });
    expect(summary.status, summary.text).toBe(200);
    expect(summary.body.today).toEqual({ accepted_volume: '0.00', accepted_count: 0, orders_by_decision: { accept: 0, reject: 0, hold: 0 } });
    expect(summary.body.week.accepted_count).toBe(0);
    expect(summary.body.days.every((d: any) => d.accepted_count === 0)).toBe(true);
    expect((await app.request('GET', '/v1/orders', { key })).body.data).toEqual([]);
    expect((await app.request('GET', `/v1/events?order_id=ord_00000000000000000000000000`, { key })).body.data).toEqual([]);
  });

  it('GIVEN a repeated Idempotency-Key WHEN a test is sent twice THEN the first answer is replayed and one event exists', async () => {
    const key = await app.key('test');
    const ep = await createEndpoint(app, key, receiver.url(newPath()));
    const first = await sendTest(key, ep.id, { 'idempotency-key': 'test-once' });
    const second = await sendTest(key, ep.id, { 'idempotency-key': 'test-once' });
    expect(second.headers.get('idempotent-replayed')).toBe('true');
    expect(second.text).toBe(first.text);
    expect((await app.request('GET', '/v1/events', { key })).body.data).toHaveLength(1);
  });

  it('GIVEN a disabled, deleted, foreign or unknown endpoint, or a key without webhooks:write WHEN a test is sent THEN the error shape and no event', async () => {
    const key = await app.key('test');
    const disabled = await createEndpoint(app, key, receiver.url(newPath()));
    expect((await app.request('PATCH', `/v1/webhooks/endpoints/${disabled.id}`, { key, body: { disabled: true } })).status).toBe(200);
    expectError(await sendTest(key, disabled.id), 409, 'WEBHOOK_ENDPOINT_DISABLED');

    const deleted = await createEndpoint(app, key, receiver.url(newPath()));
    expect((await app.request('DELETE', `/v1/webhooks/endpoints/${deleted.id}`, { key })).status).toBe(204);
    expectError(await sendTest(key, deleted.id), 404, 'NOT_FOUND');
    expectError(await sendTest(key, 'whk_00000000000000000000000000'), 404, 'NOT_FOUND');
    expectError(await sendTest(key, 'nope'), 404, 'NOT_FOUND');

    const live = await app.key('live', { projectId: key.projectId });
    const stranger = await app.key('test');
    expectError(await sendTest(live, disabled.id), 404, 'NOT_FOUND');
    expectError(await sendTest(stranger, disabled.id), 404, 'NOT_FOUND');
    const reader = await app.key('test', { projectId: key.projectId, scopes: ['webhooks:read'] });
    expectError(await sendTest(reader, disabled.id), 403, 'INSUFFICIENT_SCOPE');

    expect((await app.request('GET', '/v1/events', { key })).body.data).toEqual([]);
  });

  it('GIVEN enabled_events naming webhook_endpoint.test WHEN an endpoint is created or updated THEN 400 VALIDATION_FAILED: nobody subscribes to test events', async () => {
    const key = await app.key('test');
    const res = await app.request('POST', '/v1/webhooks/endpoints', { key, body: { url: receiver.url(newPath()), enabled_events: ['webhook_endpoint.test'] } });
    expectError(res, 400, 'VALIDATION_FAILED');
    expect(res.body.error_human).toContain('enabled_events');
    const ep = await createEndpoint(app, key, receiver.url(newPath()));
    expectError(await app.request('PATCH', `/v1/webhooks/endpoints/${ep.id}`, { key, body: { enabled_events: ['order.held', 'webhook_endpoint.test'] } }), 400, 'VALIDATION_FAILED');
  });
});
