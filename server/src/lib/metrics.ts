import { timingSafeEqual, createHash } from 'node:crypto';
import type { NextFunction, Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Orm } from '../db/orm.js';
import type { Logger } from './logger.js';
import { sendCode } from '../http/errors.js';
import { countAttemptsByStatus } from '../modules/settlement/store.js';
import { webhookQueueStats, type WebhookQueueStats } from '../modules/webhooks/store.js';

/**
 * Prometheus metrics of one app instance (prom-client). Each `createServices` builds its own
 * Registry, never the global default one, so several apps in one process (the tests) never
 * share or double-register a metric. Request and settle counters are updated as things
 * happen; the database figures (settlement attempts, webhook queue, pool) are read at
 * scrape time through the owning modules' stores (settlement/store.ts, webhooks/store.ts).
 */
export type Metrics = {
  registry: Registry;
  /** One finished HTTP request; `route` is the route template (`/v1/merchants/:id`), never the raw path. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** One settle answer: `outcome` is the body's status (or `error`), `code` its first reason code (`NONE` for accepted). */
  observeSettle(outcome: string, code: string): void;
};

export const UNMATCHED_ROUTE = '<unmatched>';

export function createMetrics(orm: Orm, log: Logger): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels({ service: 'svc-checkout' });
  collectDefaultMetrics({ register: registry });

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
  const settles = new Counter({
    name: 'svc_settle_outcomes_total',
    help: 'Settle answers by outcome (accepted, hold, settlement_pending, payment_invalid, rejected, error) and first reason code.',
    labelNames: ['outcome', 'code'] as const,
    registers: [registry],
  });

  /** A scrape never fails because the database is slow or down: it logs and reports the gauge as -1. */
  const guarded = async (what: string, read: () => Promise<void>, onError: () => void) => {
    try {
      await read();
    } catch (err) {
      log.warn({ err: err instanceof Error ? err.message : String(err), metric: what }, 'metrics: database read failed');
      onError();
    }
  };

  const attempts = new Gauge({
    name: 'svc_settlement_attempts',
    help: 'Settlement attempts by state (pending, settled, failed).',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      await guarded(
        'svc_settlement_attempts',
        async () => {
          const counts = await countAttemptsByStatus(orm.em.fork());
          this.reset();
          for (const state of ['pending', 'settled', 'failed']) this.set({ state }, 0);
          for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
        },
        () => this.reset(),
      );
    },
  });
  void attempts;

  // One query per scrape feeds both webhook gauges (the first collect runs it, the second reuses it).
  let queueRead: Promise<WebhookQueueStats> | null = null;
  const readQueue = () => (queueRead ??= webhookQueueStats(orm.em.fork()));
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

  new Gauge({
    name: 'svc_db_pool_connections',
    help: 'Database connections by state: total, idle, in use, waiting for a connection, and max (the pool size). Embedded PGlite is one in-process connection.',
    labelNames: ['state'] as const,
    registers: [registry],
    async collect() {
      const conn = orm.em.getConnection() as unknown as { getNativeClient?: () => Promise<unknown> };
      const native = (await conn.getNativeClient?.().catch(() => null)) as
        | { totalCount?: number; idleCount?: number; waitingCount?: number; options?: { max?: number } }
        | null
        | undefined;
      this.reset();
      if (native && typeof native.totalCount === 'number') {
        const total = native.totalCount;
        const idle = native.idleCount ?? 0;
        this.set({ state: 'total' }, total);
        this.set({ state: 'idle' }, idle);
        this.set({ state: 'in_use' }, total - idle);
        this.set({ state: 'waiting' }, native.waitingCount ?? 0);
        this.set({ state: 'max' }, native.options?.max ?? 0);
      } else {
        this.set({ state: 'total' }, 1);
        this.set({ state: 'max' }, 1);
      }
    },
  });

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

/**
 * `GET /metrics`. With SVC_METRICS_TOKEN set, only `Authorization: Bearer <token>` may read
 * it (401 otherwise); without it the endpoint is open in development and test and absent (404)
 * in production, so metrics are never public by default where it matters.
 */
export function metricsHandler(metrics: Metrics, opts: { token: string | undefined; production: boolean }) {
  const expected = opts.token ? createHash('sha256').update(opts.token).digest() : null;
  return async (req: Request, res: Response, next: NextFunction) => {
    if (!expected && opts.production) return next();
    if (expected) {
      const m = /^Bearer\s+(\S+)\s*$/i.exec(req.header('authorization') ?? '');
      const given = createHash('sha256').update(m?.[1] ?? '').digest();
      if (!m || !timingSafeEqual(given, expected)) {
        res.setHeader('WWW-Authenticate', 'Bearer realm="metrics"');
        return sendCode(res, 'UNAUTHENTICATED', 'GET /metrics needs Authorization: Bearer <SVC_METRICS_TOKEN>.');
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
