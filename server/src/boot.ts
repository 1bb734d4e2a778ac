import type { Config } from './config.js';
import { migrate, openOrm, type DbTarget } from './db/orm.js';
import { entities } from './entities.js';
import { RequestDbBudget } from './db/request-budget.js';
import { resolveMasterKey, SecretBox } from './lib/crypto.js';
import { createLogger, type Logger } from './lib/logger.js';
import type { Services } from './services.js';
import { EventOutbox } from './modules/events/index.js';
import { CommitWake, webhookFanOut } from './modules/webhooks/index.js';
import { reorderOrderEventObject } from './modules/orders/present.js';
import { Mailer } from './modules/auth/mail.js';
import { OperatorChannel } from './modules/operator/channel.js';
import { createFacilitators, type ProcessSlot } from './rails/index.js';
import { createMetrics } from './lib/metrics.js';
import { metricsCollectors } from './metrics-collectors.js';
import { defaultSignerThreads, SignerRecovery } from './lib/signer-recovery.js';
import { AgentReadCache } from './modules/agent/cache.js';
import { defaultDomainProofIo } from './modules/merchants/domain.js';

/** How often the agent cache's listening session is pinged: a silently dead one is noticed within this plus the statement timeout. */
const AGENT_CACHE_HEARTBEAT_MS = 2_000;

export function dbTargetFor(config: Config): DbTarget {
  return config.DATABASE_URL
    ? { kind: 'postgres', url: config.DATABASE_URL, poolMax: config.SVC_DB_POOL_MAX }
    : { kind: 'pglite', dataDir: config.SVC_DATA_DIR };
}

/** Runs the committed migrations and closes the database again: a cluster primary, once before it forks. */
export async function migrateDatabase(config: Config, log: Logger): Promise<void> {
  const orm = await openOrm(dbTargetFor(config), entities, log, { statementMs: config.SVC_DB_STATEMENT_TIMEOUT_MS, connectMs: config.SVC_DB_CONNECT_TIMEOUT_MS });
  try {
    await migrate(orm);
  } finally {
    await orm.close();
  }
}

/**
 * Opens the database, runs the committed migrations (unless `migrate: false`: a cluster
 * worker, whose primary ran them once before forking) and resolves the master key.
 */
export async function createServices(
  config: Config,
  opts: { log?: Logger; target?: DbTarget; migrate?: boolean; processSlot?: ProcessSlot } = {},
): Promise<Services> {
  const log = opts.log ?? createLogger(config.LOG_LEVEL);
  const box = new SecretBox(resolveMasterKey(config, log));
  const target = opts.target ?? dbTargetFor(config);
  const dbRequests = new RequestDbBudget(config.SVC_DB_REQUEST_TIMEOUT_MS);
  const timeouts = { statementMs: config.SVC_DB_STATEMENT_TIMEOUT_MS, connectMs: config.SVC_DB_CONNECT_TIMEOUT_MS };
  const orm = await openOrm(target, entities, log, { ...timeouts, requests: dbRequests });
  if (opts.migrate !== false) await migrate(orm);
  if (config.NODE_ENV === 'production' && target.kind === 'pglite') {
    log.warn(
      { database: 'pglite', data_dir: config.SVC_DATA_DIR },
      'NODE_ENV=production on the embedded PGlite database: it is single-process (no `npm run worker`, no second server, no admin CLI while the server runs) and not meant for production traffic; set DATABASE_URL to a PostgreSQL database',
    );
  }
  const wake = new CommitWake(orm);
  const signers = new SignerRecovery(config.SVC_SIGNER_THREADS ?? defaultSignerThreads(config.SVC_WEB_CONCURRENCY), log);
  if (signers.mode !== 'native') {
    log.warn({ reason: signers.nativeUnavailable, recovery: signers.mode }, 'the libsecp256k1 binding did not load: payment signers are recovered in JavaScript (about 1.4 ms each instead of 0.05 ms)');
  }
  // On PostgreSQL every process listens for the config triggers' NOTIFY (the listener opens on the first agent read).
  const agentCache = new AgentReadCache(orm, target.kind === 'postgres' ? { url: target.url, timeouts, heartbeatMs: AGENT_CACHE_HEARTBEAT_MS } : null, log);
  const closeOrm = orm.close.bind(orm);
  orm.close = async (force?: boolean) => {
    await agentCache.close();
    return closeOrm(force);
  };
  const services: Services = {
    config,
    orm,
    dbRequests,
    box,
    log,
    now: () => new Date(),
    facilitators: createFacilitators(config, log, signers, opts.processSlot),
    signers,
    wake,
    caches: { agent: agentCache, issuerKeys: new Map(), receiptKeys: new Map(), settleRefModes: new Map() },
    metrics: createMetrics(log, metricsCollectors(orm)),
    mailer: new Mailer(config, log),
    operator: new OperatorChannel(),
    domainProof: defaultDomainProofIo(),
    // Reads services.now at each call, so a clock replaced later (tests) is the one used.
    events: new EventOutbox(() => services.now(), webhookFanOut(wake), reorderOrderEventObject),
  };
  return services;
}

/** Releases what createServices opened: the signer threads, then the database (`force` drops busy connections). */
export async function closeServices(services: Services, opts: { force?: boolean } = {}): Promise<void> {
  await services.signers.close().catch(() => undefined);
  await services.orm.close(opts.force);
}
