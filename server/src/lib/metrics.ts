import { timingSafeEqual, createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Logger } from './logger.js';

/**
 * Prometheus metrics of one app instance (prom-client). Each `createServices` builds its own
 * Registry, never the global default one, so several apps in one process (the tests) never
 * share or double-register a metric. Request and settle counters are updated as things
 * happen; the database figures (settlement attempts, webhook queue, pool) are read at
 * scrape time through the collectors the app layer passes in (metrics-collectors.ts: the
 * owning modules' store functions), so this file imports no module and no database code.
 */
export type Metrics = {
  registry: Registry;
  /** One finished HTTP request; `route` is the route template (`/v1/merchants/:id`), never the raw path. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** One settle answer: `outcome` is the body's status (or `error`), `code` its first reason code (`NONE` for accepted). */
  observeSettle(outcome: string, code: string): void;
};

export const UNMATCHED_ROUTE = '<unmatched>';

/** The webhook queue at scrape time (on the database's clock, like the queue itself). */
export type WebhookQueueFigures = { dueNow: number; later: number; oldestDueAgeSeconds: number };
/** The database pool's connections at scrape time. */
export type PoolFigures = { total: number; idle: number; waiting: number; max: number };

/** The database figures, read at each scrape; metrics-collectors.ts builds them from the owning modules. */
export type MetricsCollectors = {
  /** Settlement attempts by state (settlement/store.ts `countAttemptsByStatus`). */
  settlementAttempts: () => Promise<Record<string, number>>;
  /** The webhook delivery queue (webhooks/store.ts `webhookQueueStats`). */
  webhookQueue: () => Promise<WebhookQueueFigures>;
  /** The pool's connections, or null without a pool (embedded PGlite: one in-process connection). */
  dbPool: () => Promise<PoolFigures | null>;
};

/** Runs one database read of a scrape; on failure logs it and lets the gauge say so (`onError`). */
type GuardedRead = (what: string, read: () => Promise<void>, onError: () => void) => Promise<void>;

export function createMetrics(log: Logger, collectors: MetricsCollectors): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: 'svc-checkout' });
  collectDefaultMetrics({ register: registry });
  const { requests, duration } = registerRequestMetrics(registry);
  const settles = registerSettleOutcomes(registry);
  const guarded = guardedRead(log);
  registerSettlementAttempts(registry, guarded, collectors.settlementAttempts);
  registerWebhookQueue(registry, guarded, collectors.webhookQueue);
  registerDbPool(registry, collectors.dbPool);
  return {
    registry,
    observeRequest(method, route, status, seconds) {
      const labels = { method, route, status: String(status) };
      requests.inc(labels);
      duration.observe(labels, seconds);
    },
    observeSettle(outcome, code) {
      settles.inc({ outcome, code });
    },
  };
}

function registerRequestMetrics(registry: Registry) {
  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'HTTP request latency by method, route template and status.',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [registry],
  });
  return { requests, duration };
}

function registerSettleOutcomes(registry: Registry) {
  return new Counter({
    name: 'svc_settle_outcomes_total',
    help: 'Settle answers by outcome (accepted, hold, settlement_pending, payment_invalid, rejected, error) and first reason code.',
    labelNames: ['outcome', 'code'] as const,
    registers: [registry],
  });
}

/** A scrape never fails because the database is slow or down: it logs and reports the gauge as -1. */
function guardedRead(log: Logger): GuardedRead {
  return async (what, read, onError) => {
    try {
      await read();
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err), metric: what }, 'metrics: database read failed');
      onError();
    }
  };
}

function registerSettlementAttempts(registry: Registry, guarded: GuardedRead, read: MetricsCollectors['settlementAttempts']): void {
  new Gauge({
    name: 'svc_settlement_attempts',
    help: 'Settlement attempts by state (pending, settled, failed).',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await guarded(
        'svc_settlement_attempts',
        async () => {
          const counts = await read();
          this.reset();
          for (const state of ['pending', 'settled', 'failed']) this.set({ state }, 0);
          for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
        },
        () => this.reset(),
      );
    },
  });
}

function registerWebhookQueue(registry: Registry, guarded: GuardedRead, read: MetricsCollectors['webhookQueue']): void {
  // One query per scrape feeds both webhook gauges (the first collect runs it, the second reuses it).
  let queueRead: Promise<WebhookQueueFigures> | null = null;
  const readQueue = () => (queueRead ??= read());
  new Gauge({
    name: 'svc_webhook_queue_depth',
    help: 'Webhook deliveries waiting to be sent (status pending): due now, or scheduled for a later retry.',
    labelNames: ['due'] as const,
    registers: [registry],
    async collect() {
      queueRead = null;
      await guarded(
        'svc_webhook_queue_depth',
        async () => {
          const q = await readQueue();
          this.set({ due: 'now' }, q.dueNow);
          this.set({ due: 'later' }, q.later);
        },
        () => this.reset(),
      );
    },
  });
  new Gauge({
    name: 'svc_webhook_oldest_due_age_seconds',
    help: 'How long the oldest due webhook delivery has been waiting (0 when none is due; -1 when the database could not be read).',
    registers: [registry],
    async collect() {
      await guarded(
        'svc_webhook_oldest_due_age_seconds',
        async () => {
          this.set((await readQueue()).oldestDueAgeSeconds);
        },
        () => this.set(-1),
      );
      queueRead = null;
    },
  });
}

function registerDbPool(registry: Registry, read: MetricsCollectors['dbPool']): void {
  new Gauge({
    name: 'svc_db_pool_connections',
    help: 'Database connections by state: total, idle, in use, waiting for a connection, and max (the pool size). Embedded PGlite is one in-process connection.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const pool = await read();
      this.reset();
      if (pool) {
        this.set({ state: 'total' }, pool.total);
        this.set({ state: 'idle' }, pool.idle);
        this.set({ state: 'in_use' }, pool.total - pool.idle);
        this.set({ state: 'waiting' }, pool.waiting);
        this.set({ state: 'max' }, pool.max);
      } else {
        this.set({ state: 'total' }, 1);
        this.set({ state: 'max' }, 1);
      }
    },
  });
}

/**
 * `GET /metrics`. With SVC_METRICS_TOKEN set, only `Authorization: Bearer <token>` may read
 * it (401 otherwise); without it the endpoint is open in development and test and absent (404)
 * in production, so metrics are never public by default where it matters. `unauthorized`
 * writes the 401's body in the API's error shape (app.ts passes http/errors.ts `sendCode`).
 */
export function metricsHandler(metrics: Metrics, opts: { token: string | undefined; production: boolean; unauthorized: (res: Response) => void }) {
  const expected = opts.token ? createHash('sha256').update(opts.token).digest() : null;
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!expected && opts.production) return next();
    if (expected) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.header('authorization') ?? '');
      const given = createHash('sha256').update(m?.[1] ?? '').digest();
      if (!m || !timingSafeEqual(given, expected)) {
        res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
        return opts.unauthorized(res);
      }
    }
    try {
      const body = await metrics.registry.metrics();
      res.setHeader('Content-Type', metrics.registry.contentType);
      res.setHeader('Cache-Control', 'no-store');
      res.status(200).send(body);
    } catch (err) {
      next(err);
    }
  };
}
