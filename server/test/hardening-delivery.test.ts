import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startWebhookWorker, type WebhookWorker, type WebhookWorkerOptions } from '../src/modules/webhooks/worker.js';
import { sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { createEndpoint, Receiver, recordEvents, waitUntil } from './helpers/webhooks.js';

let app: TestApp;
let receiver: Receiver;
const workers: WebhookWorker[] = [];
beforeAll(async () => {
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.00001' });
  receiver = await Receiver.start();
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const worker = (opts: WebhookWorkerOptions = {}) => {
  const w = startWebhookWorker(app.services, { pollIntervalMs: 20, ...opts });
  workers.push(w);
  return w;
};

describe('delivery attempts after a crash', () => {
  it('GIVEN a worker holding one attempt on the wire and several claimed but unsent WHEN it dies and another worker takes over THEN only the sent one is lost; the others are delivered with a single attempt each', async () => {
    const key = await app.key('test');
    const path = '/crash-unsent';
    const ep = await createEndpoint(app, key, receiver.url(path));
    // The first request hangs, so the endpoint's other deliveries wait behind it (sends to one endpoint are sequential).
    receiver.respond = (h) => (h.path === path && receiver.on(path).length === 1 ? 'hang' : 200);
    const events = await recordEvents(app, key, ['order.accepted', 'order.settled', 'order.settled', 'order.settled', 'order.settled', 'order.settled']);
    const doomed = worker({ name: 'doomed', leaseMs: 1_000 });
    await receiver.waitForHits(1, path);
    const held = await sql(app, "select count(*)::int as n from webhook_attempts where endpoint_id = ? and status = 'in_progress'", [ep.id]);
    expect(Number(held[0]!.n)).toBe(events.length);
    await doomed.kill();

    worker({ name: 'survivor' });
    await waitUntil(async () => {
      const [r] = await sql(app, "select count(*)::int as n from webhook_deliveries where endpoint_id = ? and status = 'succeeded'", [ep.id]);
      return Number(r!.n) === events.length;
    }, 'every delivery succeeded');

    const attempts = await sql(app, 'select event_id, status from webhook_attempts where endpoint_id = ? order by created_at, id', [ep.id]);
    const lost = attempts.filter((a) => a.status === 'lost');
    expect(lost.map((a) => a.event_id)).toEqual([receiver.on(path)[0]!.headers['svc-event-id']]);
    expect(attempts.filter((a) => a.status === 'succeeded')).toHaveLength(events.length);
    expect(attempts).toHaveLength(events.length + 1);
    // The receiver saw each event once, plus the one resend of the attempt that was on the wire.
    expect(receiver.on(path)).toHaveLength(events.length + 1);
  });
});
