import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from './app.js';
import { closeServices } from './boot.js';
import { loadConfigOrExit, startServicesOrExit } from './startup.js';
import { startWebhookWorker } from './modules/webhooks/worker.js';
import { startSettlementWorker } from './modules/settlement/reconciler.js';
import { liveReadiness } from './rails/index.js';
import { installTransportErrorHandlers } from './http/transport-errors.js';

async function main() {
  const config = loadConfigOrExit();
  const services = await startServicesOrExit(config);
  const { log } = services;
  const app = buildApp(services);
  const server: Server = app.listen(config.PORT, config.HOST, () => {
    const where = config.DATABASE_URL ? 'postgresql' : `embedded PGlite in ${config.SVC_DATA_DIR}`;
    // The embedded database is this process's alone: the admin CLI reaches it through here.
    if (!config.DATABASE_URL) {
      try {
        services.operator.open(config.SVC_DATA_DIR, (server.address() as AddressInfo).port);
      } catch (err) {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'operator channel not opened: the admin CLI needs the server stopped');
      }
    }
    log.info({ port: config.PORT, database: where, env: config.NODE_ENV }, `svc-checkout listening on http://${config.HOST === "0.0.0.0" ? "localhost" : config.HOST}:${config.PORT}`);
  });
  installTransportErrorHandlers(server);
  // Webhook delivery runs in the server by default; SVC_RUN_WORKER=false leaves it to `npm run worker`.
  const worker = config.SVC_RUN_WORKER ? startWebhookWorker(services) : null;
  // The settlement worker (reconciler and hold sweeper) runs beside it.
  const settlement = config.SVC_RUN_WORKER ? startSettlementWorker(services) : null;
  // A live facilitator that cannot settle is one clear line at start, not a silent 503 at the first sale.
  void liveReadiness(services.facilitators.live, 5_000).then((live) => {
    if (live.facilitator === 'none') log.info('live settlement is off (SVC_LIVE_FACILITATOR unset): live settles answer 503 FACILITATOR_UNAVAILABLE');
    else if (!live.ok) log.warn({ live }, `live facilitator ${live.facilitator} is not ready: live settles will fail until this is fixed`);
    else log.info({ live }, `live facilitator ${live.facilitator} ready`);
  });
  const stop = (signal: string) => {
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

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
