import type { Server } from 'node:http';
import { buildApp } from './app.js';
import { loadConfigOrExit, startServicesOrExit } from './startup.js';
import { startWebhookWorker } from './modules/webhooks/worker.js';
import { installTransportErrorHandlers } from './http/transport-errors.js';

async function main() {
  const config = loadConfigOrExit();
  const services = await startServicesOrExit(config);
  const { log } = services;
  const app = buildApp(services);
  const server: Server = app.listen(config.PORT, config.HOST, () => {
    const where = config.DATABASE_URL ? 'postgresql' : `embedded PGlite in ${config.SVC_DATA_DIR}`;
    log.info({ port: config.PORT, database: where, env: config.NODE_ENV }, `svc-checkout listening on http://${config.HOST === "0.0.0.0" ? "localhost" : config.HOST}:${config.PORT}`);
  });
  installTransportErrorHandlers(server);
  // Webhook delivery runs in the server by default; SVC_RUN_WORKER=false leaves it to `npm run worker`.
  const worker = config.SVC_RUN_WORKER ? startWebhookWorker(services) : null;
  const stop = (signal: string) => {
    log.info({ signal }, 'shutting down');
    const workerStopped = (worker?.stop() ?? Promise.resolve()).catch(() => undefined);
    server.close(() => {
      workerStopped.finally(() => services.orm.close().finally(() => process.exit(0)));
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
