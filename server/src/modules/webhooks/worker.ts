import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DeadlockException } from '@mikro-orm/core';
import type { Services } from '../../services.js';
import { createAgents, postWebhook, WEBHOOK_TIMEOUT_MS, WEBHOOK_USER_AGENT, type Agents, type AttemptOutcome } from './deliver.js';
import { claimDueDeliveries, MAX_ATTEMPTS, recordAttempts, type ClaimedDelivery, type RecordedAttempt } from './queue.js';
import { extendLeases, markSending, releaseClaims } from './store.js';
import { signatureHeader } from './signature.js';
import { outboundRules } from '../../lib/ssrf.js';

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

/** Most outcomes recorded by one transaction. */
const RECORD_BATCH = 200;
/**
 * Tries at recording one batch when PostgreSQL ends its transaction as a deadlock victim or a
 * serialization failure (DeadlockException: the whole transaction rolled back, so a retry
 * writes it once). The lock order in store.ts leaves no known cycle; this keeps an outcome
 * from being lost to one nobody foresaw.
 */
const RECORD_TRIES = 3;
/**
 * Outcomes wait this long to share a transaction. It delays only the bookkeeping (the
 * receiver already has the request), and on embedded PGlite, whose queries run on the
 * event loop, it is what lets several outcomes share one commit.
 */
const RECORD_LINGER_MS = 10;

/**
 * Delivers webhooks from the queue until stopped. Any number of workers (in one process or
 * many, on one database) may run: claims use row locks with SKIP LOCKED and a lease.
 * Deliveries of one endpoint held by this worker are sent one after another in enqueue
 * order; different endpoints are served in parallel. Outcomes are recorded in batches:
 * those that finish while the previous batch commits go into the next transaction.
 */
export function startWebhookWorker(services: Services, opts: WebhookWorkerOptions = {}): WebhookWorker {
  const pollIntervalMs = opts.pollIntervalMs ?? 500;
  const batchSize = opts.batchSize ?? 50;
  const maxInFlight = opts.maxInFlight ?? 400;
  const leaseMs = opts.leaseMs ?? 30_000;
  const timeoutMs = opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS;
  const retryScale = services.config.SVC_WEBHOOK_RETRY_SCALE;
  const owner = `${opts.name ?? hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  const log = services.log.child({ worker: owner });
  const agents: Agents = createAgents();
  const kill = new AbortController();
  const em = () => services.orm.em.fork();

  /** Claimed and not yet recorded (or handed back): the leases the heartbeat keeps. */
  const held = new Map<string, Held>();
  /** Per endpoint, the tail of its sequential sends. */
  const chains = new Map<string, Promise<void>>();
  const outcomes: RecordedAttempt[] = [];
  let recording: Promise<void> | null = null;
  let linger: NodeJS.Timeout | null = null;
  let running = true;
  let killed = false;
  let wakeUp: (() => void) | null = null;
  let wakePending = false;

  const wake = () => {
    wakePending = true;
    wakeUp?.();
  };
  const unsubscribe = services.wake.onWake(wake);

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

  /** Claims resume once a whole batch fits again, not for every slot freed. */
  const claimThreshold = Math.min(batchSize, maxInFlight);
  function release(deliveryId: string) {
    const before = held.size;
    held.delete(deliveryId);
    if (before > maxInFlight - claimThreshold && held.size <= maxInFlight - claimThreshold) wake();
  }

  function scheduleRecording() {
    if (recording || linger || outcomes.length === 0 || killed) return;
    if (outcomes.length >= RECORD_BATCH) return flushOutcomes();
    linger = setTimeout(flushOutcomes, RECORD_LINGER_MS);
  }

  /** Records queued outcomes, one transaction at a time, until none are left. */
  function flushOutcomes() {
    if (linger) clearTimeout(linger);
    linger = null;
    if (recording || outcomes.length === 0 || killed) return;
    recording = (async () => {
      while (outcomes.length > 0 && !killed) {
        const batch = outcomes.splice(0, RECORD_BATCH);
        try {
          for (let tries = 1; ; tries++) {
            try {
              await recordAttempts(em(), owner, batch, retryScale);
              break;
            } catch (err) {
              if (!(err instanceof DeadlockException) || tries >= RECORD_TRIES || killed) throw err;
              log.warn({ err, attempts: batch.length, tries }, 'recording webhook attempts met a deadlock; retrying');
            }
          }
          for (const { claim, outcome } of batch) {
            if (!outcome.ok && claim.attemptNumber >= MAX_ATTEMPTS) {
              log.warn({ event_id: claim.eventId, endpoint_id: claim.endpointId, error: outcome.error }, 'webhook delivery failed permanently');
            }
          }
        } catch (err) {
          // Unrecorded attempts keep their lease until it runs out; then another claim sends them again (at least once).
          log.error({ err, attempts: batch.length }, 'could not record webhook attempts');
        }
        if (killed) return;
        for (const { claim } of batch) release(claim.deliveryId);
      }
    })().finally(() => {
      recording = null;
      scheduleRecording();
    });
  }

  /** Attempts about to be sent in this tick: stamped `sending_at` by one statement before any of them goes out. */
  let sendingBatch: { ids: string[]; written: Promise<void> } | null = null;
  function stampSending(attemptId: string): Promise<void> {
    if (!sendingBatch) {
      const batch: { ids: string[]; written: Promise<void> } = { ids: [], written: Promise.resolve() };
      batch.written = new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => {
          sendingBatch = null;
          return markSending(em(), batch.ids);
        })
        // Sending anyway keeps at-least-once; only a crash right after would then miss its `lost` record.
        .catch((err: unknown) => log.error({ err, attempts: batch.ids.length }, 'could not stamp webhook attempts as sending'));
      sendingBatch = batch;
    }
    sendingBatch.ids.push(attemptId);
    return sendingBatch.written;
  }

  async function deliverOne(h: Held): Promise<void> {
    if (h.dropped || killed) return;
    h.started = true;
    const c = h.claim;
    await stampSending(c.attemptId);
    if (killed) return;
    const t = Math.floor(services.now().getTime() / 1000);
    const outcome: AttemptOutcome = await postWebhook(
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
        rules: outboundRules(services.config, c.livemode),
        timeoutMs,
        signal: kill.signal,
      },
      agents,
    ).catch((err: unknown) => ({ ok: false, responseStatus: null, durationMs: 0, error: `could not send: ${String(err)}` }));
    if (killed) return;
    outcomes.push({ claim: c, outcome });
    scheduleRecording();
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
          if (chains.get(claim.endpointId) === next) chains.delete(claim.endpointId);
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
      if (room >= claimThreshold) {
        try {
          const claims = await claimDueDeliveries(em(), services.box, services.now(), owner, room, leaseMs, (endpointId, err) =>
            log.error({ err, endpoint_id: endpointId }, 'cannot open a webhook secret (was SVC_MASTER_KEY changed?); its deliveries wait'),
          );
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

  const heartbeat = setInterval(
    () => {
      if (held.size === 0 || killed) return;
      extendLeases(em(), owner, leaseMs).catch((err: unknown) => log.error({ err }, 'webhook lease renewal failed'));
    },
    Math.max(50, Math.floor(leaseMs / 3)),
  );
  heartbeat.unref();

  const looping = loop();
  log.info({ pollIntervalMs, leaseMs }, 'webhook worker started');

  async function drainRecording() {
    flushOutcomes();
    while (recording) await recording;
  }

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
      await drainRecording();
    } else {
      await looping;
      const unsent = [...held.values()].filter((h) => !h.started);
      for (const h of unsent) h.dropped = true;
      await Promise.allSettled([...chains.values()]);
      await drainRecording();
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

  let stopping: Promise<void> | null = null;
  const shutdown = (mode: 'stop' | 'kill') => (stopping ??= halt(mode));

  return {
    owner,
    stop: () => shutdown('stop'),
    kill: () => shutdown('kill'),
    wake,
  };
}
