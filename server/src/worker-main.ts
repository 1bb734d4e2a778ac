import { closeServices } from './boot.js';
import { loadConfigOrExit, startServicesOrExit } from './startup.js';
import { startWebhookWorker } from './modules/webhooks/worker.js';
import { startSettlementWorker } from './modules/settlement/reconciler.js';

/**
 * `npm run worker`: webhook delivery and the settlement reconciler without the HTTP server. Run as many as you like
 * against one PostgreSQL database (pair them with SVC_RUN_WORKER=false on the servers if
 * you want delivery only here). Embedded PGlite belongs to a single process, so there the
 * worker runs inside `npm start` instead.
 */
async function main() {
  const config = loadConfigOrExit();
  if (!config.DATABASE_URL) {
    process.stderr.write(
      'npm run worker needs DATABASE_URL (PostgreSQL): embedded PGlite is a single-process database, and `npm start` already runs the worker there.\n',
    );
    process.exit(1);
  }
  const services = await startServicesOrExit(config);
  const worker = startWebhookWorker(services);
  const settlement = startSettlementWorker(services);
  services.log.info({ retry_scale: config.SVC_WEBHOOK_RETRY_SCALE }, 'svc-checkout webhook worker running');
  const stop = (signal: string) => {
    services.log.info({ signal }, 'shutting down');
    Promise.all([worker.stop(), settlement.stop(), services.facilitators.live.close()])
      .catch(() => undefined)
      .finally(() => closeServices(services).finally(() => process.exit(0)));
    setTimeout(() => process.exit(0), 15_000).unref();
  };
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGTERM', () => stop('SIGTERM'));
}

main().catch((err: unknown) => {
  process.stderr.write(`fatal: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
