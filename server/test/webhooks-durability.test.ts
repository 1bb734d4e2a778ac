import { spawn } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhook } from '@svc/sdk';
import { startWebhookWorker } from '../src/modules/webhooks/worker.js';
import { onPostgres } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { createEndpoint, Receiver, recordEvents } from './helpers/webhooks.js';

let app: TestApp;
let receiver: Receiver;
beforeAll(async () => {
  app = await TestApp.start({ SVC_WEBHOOK_RETRY_SCALE: '0.001' }, { persistent: true });
  receiver = await Receiver.start();
});
afterAll(async () => {
  await receiver?.close();
  await app?.stop();
});

const ROOT = resolve(import.meta.dirname, '../..');

describe('durable delivery', () => {
  it('an event recorded before the server stops is delivered after it restarts', async () => {
    // GIVEN an event committed while no worker runs
    const key = await app.key('test');
    const ep = await createEndpoint(app, key, receiver.url('/restart'));
    const [ev] = await recordEvents(app, key, ['order.settled']);
    // WHEN the server goes down and comes back on the same database, with its worker
    await app.restart();
    const worker = startWebhookWorker(app.services, { pollIntervalMs: 20 });
    try {
      // THEN the event is delivered
      const [hit] = await receiver.waitForHits(1, '/restart');
      expect(hit!.headers['svc-event-id']).toBe(ev!.id);
      expect(verifyWebhook(hit!.raw, String(hit!.headers['svc-signature']), ep.secret).ok).toBe(true);
    } finally {
      await worker.stop();
    }
  });

  it('npm run worker delivers on PostgreSQL, and refuses embedded PGlite', async () => {
    const key = await app.key('test');
    await createEndpoint(app, key, receiver.url('/standalone'));
    const [ev] = await recordEvents(app, key, ['order.accepted']);
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      SVC_MASTER_KEY: app.config.SVC_MASTER_KEY!,
      SVC_DATA_DIR: app.config.SVC_DATA_DIR,
    };
    if (onPostgres) env.DATABASE_URL = app.services.orm.config.get('clientUrl') as string;
    const child = spawn(resolve(ROOT, 'node_modules/.bin/tsx'), ['server/src/worker-main.ts'], { cwd: ROOT, env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    if (onPostgres) {
      const [hit] = await receiver.waitForHits(1, '/standalone', 60_000);
      expect(hit!.headers['svc-event-id']).toBe(ev!.id);
      child.kill('SIGTERM');
      expect(await exited).toBe(0);
    } else {
      expect(await exited).toBe(1);
      expect(stderr).toContain('npm run worker needs DATABASE_URL');
      expect(receiver.on('/standalone')).toHaveLength(0);
    }
  });
});
