import type { Config } from './config.js';
import { migrate, openOrm, type DbTarget } from './db/orm.js';
import { resolveMasterKey, SecretBox } from './lib/crypto.js';
import { createLogger, type Logger } from './lib/logger.js';
import type { Services } from './services.js';
import { installWebhooks } from './modules/webhooks/service.js';
import { createFacilitators } from './rails/index.js';

export function dbTargetFor(config: Config): DbTarget {
  return config.DATABASE_URL
    ? { kind: 'postgres', url: config.DATABASE_URL, poolMax: config.SVC_DB_POOL_MAX }
    : { kind: 'pglite', dataDir: config.SVC_DATA_DIR };
}

/** Opens the database, runs the committed migrations and resolves the master key. */
export async function createServices(config: Config, opts: { log?: Logger; target?: DbTarget } = {}): Promise<Services> {
  const log = opts.log ?? createLogger(config.LOG_LEVEL);
  const box = new SecretBox(resolveMasterKey(config, log));
  const orm = await openOrm(opts.target ?? dbTargetFor(config), log, {
    statementMs: config.SVC_DB_STATEMENT_TIMEOUT_MS,
    connectMs: config.SVC_DB_CONNECT_TIMEOUT_MS,
  });
  await migrate(orm);
  installWebhooks({ orm });
  return { config, orm, box, log, now: () => new Date(), facilitators: createFacilitators(config, log) };
}
