import type { OrderEventObject } from '@svc/contract';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScratchDatabase } from '../src/db/scratch.js';
import { ulid } from 'ulid';
import { createServices } from '../src/boot.js';
import { loadConfig } from '../src/config.js';
import { openOrm, type DbTarget } from '../src/db/orm.js';
import { entities } from '../src/entities.js';
import { createLogger } from '../src/lib/logger.js';
import { createProject } from '../src/modules/accounts/service.js';
import { createWebhookEndpoint } from '../src/modules/webhooks/service.js';
import { startWebhookWorker } from '../src/modules/webhooks/worker.js';
import type { Services } from '../src/services.js';

export type WebhookBenchOptions = { events?: number; workers?: number };

/**
 * Delivered webhooks per second: `events` events enqueued up front (one endpoint each),
 * then `workers` workers deliver them to a local node:http receiver that answers 200.
 * Timed from the workers' start until every delivery is recorded as succeeded.
 * PostgreSQL when DATABASE_URL is set (a scratch database, dropped afterwards, each
 * worker on its own pool as separate processes would be), else in-memory PGlite.
 */
export async function benchWebhooks(opts: WebhookBenchOptions = {}): Promise<string> {
  const events = opts.events ?? 2000;
  const workerCount = opts.workers ?? 2;
  const adminUrl = process.env.DATABASE_URL;
  let target: DbTarget = { kind: 'pglite', dataDir: null };
  let dropDb = async () => undefined as void;
  if (adminUrl) {
    const scratch = await createScratchDatabase(adminUrl, 'svc_bench');
    target = scratch.target;
    dropDb = scratch.drop;
  }
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_DATA_DIR: join(tmpdir(), `svc-bench-${ulid()}`),
  });
  const services = await createServices(config, { target, log: createLogger('silent') });
  const extra: Services[] = [];

  let received = 0;
  const receiver = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      received += 1;
      res.writeHead(200).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  const port = (receiver.address() as AddressInfo).port;

  try {
    const project = await createProject(services.orm.em.fork(), 'bench', { now: services.now() });
    const auth = { via: 'key' as const, keyId: 'key_bench', userId: null, sessionId: null, projectId: project.id, mode: 'test' as const, livemode: false, scopes: [] };
    await createWebhookEndpoint(
      { em: services.orm.em.fork(), log: services.log, requestId: 'bench', services, auth },
      { url: `http://127.0.0.1:${port}/hook`, enabled_events: ['*'] },
    );
    const object: OrderEventObject = {
      id: 'ord_bench',
      source: 'hosted',
      session_id: 'sess_bench',
      merchant_id: 'mrch_bench',
      agent_id: '00000000-0000-4000-8000-000000000000',
      total: { currency: 'USD', subtotal: '1.00', tax: '0.00', total: '1.00' },
      items: [{ sku: 'A', qty: 1 }],
      rail_name: 'mock',
      mandate_type: 'none',
      mandate_ref: null,
      trust_tier: 'standard',
    };
    for (let done = 0; done < events; done += 100) {
      await services.orm.em.fork().transactional(async (tx) => {
        for (let i = done; i < Math.min(events, done + 100); i++) {
          // one order.settled per order (events_one_settled_per_order), so each event names its own order
          await services.events.record(tx, { projectId: project.id, merchantId: null, livemode: false, type: 'order.settled', object: { ...object, id: `ord_bench_${i}` } });
        }
      });
    }

    const workerServices: Services[] = [services];
    for (let i = 1; i < workerCount; i++) {
      if (target.kind === 'postgres') {
        const s = { ...services, orm: await openOrm(target, entities) };
        extra.push(s);
        workerServices.push(s);
      } else {
        workerServices.push(services);
      }
    }
    const started = process.hrtime.bigint();
    const workers = workerServices.map((s, i) => startWebhookWorker(s, { name: `bench-${i + 1}`, pollIntervalMs: 50 }));
    const em = services.orm.em.fork();
    for (;;) {
      const [row] = await em.execute<Array<{ n: string | number }>>("select count(*) as n from webhook_deliveries where status = 'succeeded'");
      if (Number(row!.n) >= events) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const seconds = Number(process.hrtime.bigint() - started) / 1e9;
    await Promise.all(workers.map((w) => w.stop()));
    const [dups] = await em.execute<Array<{ n: string | number }>>('select count(*) - count(distinct delivery_id) as n from webhook_attempts');
    const backend = target.kind === 'postgres' ? 'postgresql' : 'pglite (in memory)';
    return (
      `webhooks: ${events} deliveries by ${workerCount} workers in ${seconds.toFixed(2)} s = ${Math.round(events / seconds)} delivered/s ` +
      `(${backend}, receiver hits ${received}, duplicate attempts ${Number(dups!.n)})`
    );
  } finally {
    receiver.closeAllConnections();
    await new Promise<void>((r) => receiver.close(() => r()));
    for (const s of extra) await s.orm.close(true);
    await services.orm.close(true);
    await dropDb();
  }
}
