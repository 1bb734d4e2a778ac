import cluster, { type Worker } from 'node:cluster';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import { closeServices, migrateDatabase } from './boot.js';
import type { Config } from './config.js';
import { createLogger } from './lib/logger.js';
import { loadConfigOrExit, startServicesOrExit } from './startup.js';
import { startWebhookWorker } from './modules/webhooks/worker.js';
import { startSettlementWorker } from './modules/settlement/reconciler.js';
import { liveReadiness, type ProcessSlot } from './rails/index.js';
import { createHttpServer } from './http/transport-errors.js';
import { buildDashboardInBackground } from './http/dashboard-build.js';

/**
 * `npm start`. With SVC_WEB_CONCURRENCY=N > 1 (PostgreSQL only; README "Running in
 * production"), this process is a node:cluster primary: it runs the migrations once, forks N
 * server processes that share the listening port, restarts one that dies, and on SIGTERM or
 * SIGINT stops them all. Otherwise it is the one server process.
 */
async function main() {
  const config = loadConfigOrExit();
  if (config.SVC_WEB_CONCURRENCY > 1 && cluster.isPrimary) return runPrimary(config);
  // Set by the primary for its own workers (not an operator variable): which process this is.
  const slot = cluster.isWorker ? Number(process.env.SVC_CLUSTER_SLOT ?? 0) : 0;
  return runServer(config, cluster.isWorker ? { slot, of: config.SVC_WEB_CONCURRENCY } : undefined);
}

/** One server process: HTTP, and (SVC_RUN_WORKER) webhook delivery and the settlement worker. */
async function runServer(config: Config, processSlot?: ProcessSlot) {
  // A cluster worker's primary has already migrated the database.
  const services = await startServicesOrExit(config, { migrate: !processSlot, ...(processSlot ? { processSlot } : {}) });
  const log = processSlot ? services.log.child({ process_slot: processSlot.slot }) : services.log;
  const app = buildApp(services);
  const server: Server = createHttpServer(app);
  server.listen(config.PORT, config.HOST, () => {
    const where = config.DATABASE_URL ? 'postgresql' : `embedded PGlite in ${config.SVC_DATA_DIR}`;
    // The embedded database is this process's alone: the admin CLI reaches it through here.
    // (Never in a cluster: SVC_WEB_CONCURRENCY > 1 requires PostgreSQL.)
    if (!config.DATABASE_URL) {
      try {
        services.operator.open(config.SVC_DATA_DIR, (server.address() as AddressInfo).port);
      } catch (err) {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'operator channel not opened: the admin CLI needs the server stopped');
      }
    }
    const port = (server.address() as AddressInfo).port;
    // A development start does not wait for Vite: once the API listens, a stale dashboard is
    // rebuilt beside it (not before, where it would slow the database's first start).
    if (config.NODE_ENV !== 'production' && !processSlot) void buildDashboardInBackground(log);
    log.info({ port, database: where, env: config.NODE_ENV }, `svc-checkout listening on http://${config.HOST === "0.0.0.0" ? "localhost" : config.HOST}:${port}`);
  });
  // Webhook delivery runs in the server by default; SVC_RUN_WORKER=false leaves it to `npm run worker`.
  const worker = config.SVC_RUN_WORKER ? startWebhookWorker(services) : null;
  // The settlement worker (reconciler and hold sweeper) runs beside it.
  const settlement = config.SVC_RUN_WORKER ? startSettlementWorker(services) : null;
  // A live facilitator that cannot settle is one clear line at start, not a silent 503 at the first sale.
  void liveReadiness(services.facilitators.live, 5_000).then((live) => {
    if (live.facilitator === 'none') log.info('live settlement is off (SVC_LIVE_FACILITATOR unset): live settles answer 503 FACILITATOR_UNAVAILABLE');
    else if (!live.ok) log.warn({ live }, `live facilitator ${live.facilitator} is not ready: ${String(live.detail.cause ?? 'see live.detail')} Live settles answer 503 FACILITATOR_UNAVAILABLE until this is fixed.`);
    else log.info({ live }, `live facilitator ${live.facilitator} ready`);
  });
  let stopping = false;
  const stop = (signal: string) => {
    // A terminal's Ctrl-C reaches a cluster worker twice (from the terminal and from the primary).
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    services.operator.close();
    const workerStopped = Promise.all([worker?.stop(), settlement?.stop(), services.facilitators.live.close()]).catch(() => undefined);
    server.close(() => {
      workerStopped.finally(() => closeServices(services).finally(() => process.exit(0)));
    });
    // Longer than one delivery attempt (10 s) so an in-flight webhook can finish.
    setTimeout(() => process.exit(0), 12_000).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

/** A server process that lived less than this before it died counts as a crash loop: restarts back off. */
const HEALTHY_AFTER_MS = 10_000;
const MAX_RESTART_DELAY_MS = 30_000;
/** The workers' own grace (12 s) plus a margin; then the primary kills what is left. */
const STOP_GRACE_MS = 15_000;

/**
 * The cluster primary: no database pool and no HTTP of its own. Migrations run here once, so N
 * processes starting together never race on them; each server process gets a slot 0..N-1
 * (its relayer keys, its log field) that a restarted process takes over.
 */
async function runPrimary(config: Config) {
  const log = createLogger(config.LOG_LEVEL).child({ role: 'primary' });
  const n = config.SVC_WEB_CONCURRENCY;
  try {
    await migrateDatabase(config, log);
  } catch (err) {
    process.stderr.write(`fatal: migrations failed: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  }
  const slots = new Map<Worker, { slot: number; startedAt: number }>();
  const failures = new Array<number>(n).fill(0);
  let stopping = false;

  const fork = (slot: number) => {
    const w = cluster.fork({ SVC_CLUSTER_SLOT: String(slot) });
    slots.set(w, { slot, startedAt: Date.now() });
  };

  cluster.on('exit', (w, code, signal) => {
    const info = slots.get(w);
    slots.delete(w);
    if (stopping) {
      if (slots.size === 0) {
        log.info('all server processes stopped');
        process.exit(0);
      }
      return;
    }
    if (!info) return;
    const lived = Date.now() - info.startedAt;
    failures[info.slot] = lived >= HEALTHY_AFTER_MS ? 0 : failures[info.slot]! + 1;
    const delay = failures[info.slot] === 0 ? 0 : Math.min(MAX_RESTART_DELAY_MS, 500 * 2 ** (failures[info.slot]! - 1));
    log.warn({ slot: info.slot, pid: w.process.pid, code, signal, restart_in_ms: delay }, `server process ${info.slot} exited; restarting it`);
    setTimeout(() => {
      if (!stopping) fork(info.slot);
    }, delay).unref();
  });

  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, processes: slots.size }, 'shutting down the server processes');
    if (slots.size === 0) process.exit(0);
    for (const w of slots.keys()) w.process.kill('SIGTERM');
    setTimeout(() => {
      for (const w of slots.keys()) w.process.kill('SIGKILL');
      process.exit(0);
    }, STOP_GRACE_MS).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));

  for (let slot = 0; slot < n; slot++) fork(slot);
  log.info({ processes: n, pid: process.pid, port: config.PORT }, `svc-checkout cluster primary: ${n} server processes on one PostgreSQL database`);
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
