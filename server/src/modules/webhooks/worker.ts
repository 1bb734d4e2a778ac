import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Services } from '../../services.js';
import { createAgents, postWebhook, WEBHOOK_TIMEOUT_MS, WEBHOOK_USER_AGENT, type Agents } from './deliver.js';
import { claimDue, extendLeases, recordAttempt, releaseClaims, type ClaimedDelivery } from './queue.js';
import { signatureHeader } from './signature.js';
import { onWake } from './wake.js';

export type WebhookWorkerOptions = {
  /** How often an idle worker looks for due deliveries (local enqueues also wake it at once). */
  pollIntervalMs?: number;
  /** Most deliveries claimed by one query. */
  batchSize?: number;
  /** Most deliveries held (claimed, not yet recorded) at once. */
  maxInFlight?: number;
  /** Lease of a claimed delivery; renewed while held, so it only runs out when the worker is gone. */
  leaseMs?: number;
  /** Per-attempt limit; a 2xx must arrive within it (section 8: 10 s). */
  timeoutMs?: number;
  /** Name in logs and in `lock_owner`. */
  name?: string;
};

export type WebhookWorker = {
  readonly owner: string;
  /** Graceful: stops claiming, finishes and records attempts in flight, hands back unsent claims. */
  stop(): Promise<void>;
  /** As if the process died: aborts attempts in flight and writes nothing; leases run out and another worker retries. */
  kill(): Promise<void>;
  /** Looks for due deliveries now instead of at the next poll. */
  wake(): void;
};

type Held = { claim: ClaimedDelivery; started: boolean; dropped: boolean };

/**
 * Delivers webhooks from the queue until stopped. Any number of workers (in one process or
 * many, on one database) may run: claims use row locks with SKIP LOCKED. Deliveries of one
 * endpoint held by this worker are sent one after another in enqueue order; different
 * endpoints are served in parallel.
 */
export function startWebhookWorker(services: Services, opts: WebhookWorkerOptions = {}): WebhookWorker {
  const pollIntervalMs = opts.pollIntervalMs ?? 500;
  const batchSize = opts.batchSize ?? 50;
  const maxInFlight = opts.maxInFlight ?? 200;
  const leaseMs = opts.leaseMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const retryScale = services.config.SVC_WEBHOOK_RETRY_SCALE;
  const owner = `${opts.name ?? hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  const log = services.log.child({ worker: owner });
  const agents: Agents = createAgents();
  const kill = new AbortController();

  const held = new Map<string, Held>();
  const chains = new Map<string, Promise<void>>();
  let running = true;
  let killed = false;
  let wakeUp: (() => void) | null = null;
  let wakePending = false;

  const wake = () => {
    wakePending = true;
    wakeUp?.();
  };
  const unsubscribe = onWake(wake);

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (wakePending || !running) return resolve();
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        wakeUp = null;
        resolve();
      }
      wakeUp = done;
    });

  const em = () => services.orm.em.fork();

  async function deliverOne(h: Held): Promise<void> {
    if (h.dropped || killed) return;
    h.started = true;
    const c = h.claim;
    const t = Math.floor(Date.now() / 1000);
    const outcome = await postWebhook(
      {
        url: c.url,
        body: c.body,
        headers: {
          'Content-Type': 'application/json',
          'User-Agent': WEBHOOK_USER_AGENT,
          'Svc-Signature': signatureHeader(c.body, c.secrets, t),
          'Svc-Event-Id': c.eventId,
          'Svc-Delivery-Id': c.attemptId,
        },
        restrictAddresses: c.livemode,
        timeoutMs,
        signal: kill.signal,
      },
      agents,
    );
    if (killed) return;
    try {
      await recordAttempt(em(), owner, c, outcome, retryScale);
      log.debug({ event_id: c.eventId, endpoint_id: c.endpointId, attempt: c.attemptNumber, ok: outcome.ok, status: outcome.responseStatus, ms: outcome.durationMs }, 'webhook attempt');
      if (!outcome.ok && c.attemptNumber >= 7) {
        log.warn({ event_id: c.eventId, endpoint_id: c.endpointId, error: outcome.error }, 'webhook delivery failed permanently');
      }
    } catch (err) {
      // The lease runs out and another claim sends the attempt again (at least once).
      log.error({ err, event_id: c.eventId, endpoint_id: c.endpointId }, 'could not record a webhook attempt');
    }
  }

  function dispatch(claims: ClaimedDelivery[]) {
    for (const claim of claims) {
      const h: Held = { claim, started: false, dropped: false };
      held.set(claim.deliveryId, h);
      const prev = chains.get(claim.endpointId) ?? Promise.resolve();
      const next = prev
        .then(() => deliverOne(h))
        .catch((err: unknown) => log.error({ err }, 'webhook delivery crashed'))
        .finally(() => {
          held.delete(claim.deliveryId);
          if (chains.get(claim.endpointId) === next) chains.delete(claim.endpointId);
          if (held.size === maxInFlight - 1) wake();
        });
      chains.set(claim.endpointId, next);
    }
  }

  async function loop() {
    let failures = 0;
    while (running) {
      wakePending = false;
      const room = Math.min(batchSize, maxInFlight - held.size);
      let claimed = 0;
      if (room > 0) {
        try {
          const claims = await claimDue(em(), services.box, owner, room, leaseMs);
          failures = 0;
          claimed = claims.length;
          if (killed) return;
          dispatch(claims);
        } catch (err) {
          failures += 1;
          log.error({ err }, 'webhook claim failed');
          await sleep(Math.min(pollIntervalMs * 2 ** failures, 30_000));
          continue;
        }
      }
      if (claimed > 0 && claimed === room) continue;
      await sleep(pollIntervalMs);
    }
  }

  const heartbeat = setInterval(() => {
    if (held.size === 0 || killed) return;
    extendLeases(em(), owner, leaseMs).catch((err: unknown) => log.error({ err }, 'webhook lease renewal failed'));
  }, Math.max(50, Math.floor(leaseMs / 3)));
  heartbeat.unref();

  const looping = loop();
  log.info({ pollIntervalMs, leaseMs }, 'webhook worker started');

  let stopping: Promise<void> | null = null;
  const shutdown = (mode: 'stop' | 'kill') => (stopping ??= halt(mode));

  async function halt(mode: 'stop' | 'kill') {
    running = false;
    unsubscribe();
    wakeUp?.();
    if (mode === 'kill') {
      killed = true;
      kill.abort();
      clearInterval(heartbeat);
      await looping;
      await Promise.allSettled([...chains.values()]);
    } else {
      await looping;
      const unsent = [...held.values()].filter((h) => !h.started);
      for (const h of unsent) h.dropped = true;
      await Promise.allSettled([...chains.values()]);
      clearInterval(heartbeat);
      await releaseClaims(
        em(),
        owner,
        unsent.map((h) => h.claim),
      ).catch((err: unknown) => log.error({ err }, 'could not hand back unsent webhook claims'));
    }
    agents.http.destroy();
    agents.https.destroy();
    log.info({ mode }, 'webhook worker stopped');
  }

  return {
    owner,
    stop: () => shutdown('stop'),
    kill: () => shutdown('kill'),
    wake,
  };
}
