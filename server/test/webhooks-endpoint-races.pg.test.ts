import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type ApiResponse, type TestKey } from './helpers/harness.js';
import { createEndpoint, orderObject, Receiver, recordEvents, waitUntil } from './helpers/webhooks.js';

/**
 * PostgreSQL only (row locks of concurrent transactions): runs when DATABASE_URL is set.
 * Issue 24.9: a disable or delete of a webhook endpoint while its deliveries are in flight met
 * the worker's recording of their outcomes in the opposite lock order (a deadlock): 500 on the
 * API with the change rolled back, and outcomes the worker could not record.
 */
let app: TestApp;
let receiver: Receiver;
let workers: WebhookWorker[] = [];
const logs: Array<{ level: number; msg: string; err?: unknown }> = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line));
      done();
    },
  });
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.001' }, { log: pino({ level: 'warn' }, sink) });
  // Every fourth answer fails, so deliveries are retried too.
  receiver = await Receiver.start((_hit, i) => (i % 4 === 3 ? 500 : 200));
  // Two workers, as two processes would run them: outcomes are recorded all the time.
  workers = [startWebhookWorker(app.services, { pollIntervalMs: 10, name: 'w1' }), startWebhookWorker(app.services, { pollIntervalMs: 10, name: 'w2' })];
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await receiver?.close();
  await app?.stop();
});

const ROUNDS = 200;

/** Orders accepted and settled (two events each), each fanned out to every endpoint of the key's project. */
async function fanOut(key: TestKey, orders: number) {
  for (let i = 0; i < orders; i++) await recordEvents(app, key, ['order.accepted', 'order.settled'], orderObject('mrch_00000000000000000000000000'));
}

describe('issue 24.9: webhook endpoints disabled and deleted while deliveries are in flight (PostgreSQL)', () => {
  it(`GIVEN deliveries in flight to two endpoints WHEN one is disabled and the other deleted as more events fan out, ${ROUNDS} rounds THEN no answer is a 5xx, a test send right after the disable is 409, and every attempt is recorded and every delivery of a disabled or deleted endpoint ends`, async () => {
    const key: TestKey = await app.key('test');
    const answers: ApiResponse[] = [];
    const endpointIds: string[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // GIVEN two endpoints with deliveries in flight
      const a = await createEndpoint(app, key, receiver.url(`/r${round}/a`));
      const b = await createEndpoint(app, key, receiver.url(`/r${round}/b`));
      endpointIds.push(a.id, b.id);
      await fanOut(key, 6);
      await receiver.waitForHits(1, `/r${round}/a`);
      await receiver.waitForHits(1, `/r${round}/b`);

      // WHEN a is disabled and b deleted while deliveries are sent and recorded, and more events fan out
      const [disabled, deleted] = await Promise.all([
        app.request('PATCH', `/v1/webhooks/endpoints/${a.id}`, { key, body: { disabled: true } }),
        app.request('DELETE', `/v1/webhooks/endpoints/${b.id}`, { key }),
        fanOut(key, 2),
      ]);
      answers.push(disabled, deleted);
      expect(disabled.status, `round ${round}: ${disabled.text}`).toBe(200);
      expect(disabled.body.status).toBe('disabled');
      expect(deleted.status, `round ${round}: ${deleted.text}`).toBe(204);

      // THEN the disable held: a test send right after it is refused, the deleted endpoint is gone
      expectError(await app.request('POST', `/v1/webhooks/endpoints/${a.id}/test`, { key }), 409, 'WEBHOOK_ENDPOINT_DISABLED');
      expectError(await app.request('POST', `/v1/webhooks/endpoints/${b.id}/test`, { key }), 404, 'NOT_FOUND');
      // (at most 16 endpoints per project and mode: a goes too, its late deliveries still in flight)
      const gone = await app.request('DELETE', `/v1/webhooks/endpoints/${a.id}`, { key });
      answers.push(gone);
      expect(gone.status, `round ${round}: ${gone.text}`).toBe(204);
    }
    expect(answers.filter((r) => r.status >= 500)).toEqual([]);

    // Every attempt in flight finishes and is recorded.
    await waitUntil(
      async () => (await sql(app, `select 1 from webhook_attempts where endpoint_id in (?) and status = 'in_progress' limit 1`, [endpointIds])).length === 0,
      'every attempt recorded',
      120_000,
    );
    // No delivery of a disabled or deleted endpoint is left waiting, and none ran out of its lease unrecorded.
    // (A fan-out that read the endpoint before the last round's disable or delete committed still
    // enqueues a delivery to it; the next claim cancels it, so this waits for that claim.)
    await waitUntil(
      async () => (await sql(app, `select 1 from webhook_deliveries where endpoint_id in (?) and status = 'pending' limit 1`, [endpointIds])).length === 0,
      'every delivery of a disabled or deleted endpoint ended',
      30_000,
    );
    expect(await sql(app, `select id, error from webhook_attempts where endpoint_id in (?) and status = 'lost' and error like 'the worker stopped%'`, [endpointIds])).toEqual([]);
    // Nothing failed to record, and no transaction met a deadlock (not even one the worker retried).
    expect(logs.filter((l) => l.level >= 50 || /deadlock/i.test(l.msg)).map((l) => ({ msg: l.msg, err: l.err }))).toEqual([]);
  }, 900_000);
});
