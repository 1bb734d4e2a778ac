import type { Orm } from './db/orm.js';
import type { MetricsCollectors, PoolFigures } from './lib/metrics.js';
import { countAttemptsByStatus } from './modules/settlement/store.js';
import { webhookQueueStats } from './modules/webhooks/index.js';

/**
 * The database figures `GET /metrics` reads at each scrape (lib/metrics.ts), wired here from
 * the modules that own them: lib/ stays below the modules. Each read runs on a fresh fork.
 */
export function metricsCollectors(orm: Orm): MetricsCollectors {
  return {
    settlementAttempts: () => countAttemptsByStatus(orm.em.fork()),
    webhookQueue: () => webhookQueueStats(orm.em.fork()),
    dbPool: () => poolFigures(orm),
  };
}

/** The pg pool's counters; null on embedded PGlite (no pool) or when the client cannot be had. */
async function poolFigures(orm: Orm): Promise<PoolFigures | null> {
  // MikroORM's connection type does not declare the driver's native client (pg.Pool on PostgreSQL).
  const conn: { getNativeClient?: () => Promise<unknown> } = orm.em.getConnection();
  const native = (await conn.getNativeClient?.().catch(() => null)) as
    | { totalCount?: number; idleCount?: number; waitingCount?: number; options?: { max?: number } }
    | null
    | undefined;
  if (!native || typeof native.totalCount !== 'number') return null;
  return { total: native.totalCount, idle: native.idleCount ?? 0, waiting: native.waitingCount ?? 0, max: native.options?.max ?? 0 };
}
