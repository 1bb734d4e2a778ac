import { unixSeconds } from '../../lib/time.js';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { DeadlockException } from '@mikro-orm/core';
import type { Services } from '../../http/context.js';
import type { Logger } from '../../lib/logger.js';
import { createAgents, postWebhook, WEBHOOK_TIMEOUT_MS, WEBHOOK_USER_AGENT, type Agents, type AttemptOutcome, type WebhookRequest } from './deliver.js';
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

/** A claim this worker holds: `started` once its send began, `dropped` when a graceful stop hands it back unsent. */
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

/** What a worker is configured with (WebhookWorkerOptions with their defaults, and its owner name). */
type WorkerSettings = {
  owner: string;
  pollIntervalMs: number;
  batchSize: number;
  maxInFlight: number;
  leaseMs: number;
  timeoutMs: number;
  retryScale: number;
  /** Claims resume once a whole batch fits again, not for every slot freed. */
  claimThreshold: number;
};

/** Everything one worker keeps between its steps; each step below takes it explicitly. */
type WorkerState = {
  readonly services: Services;
  readonly settings: WorkerSettings;
  readonly log: Logger;
  readonly agents: Agents;
  /** Aborts the attempts in flight (kill). */
  readonly kill: AbortController;
  /** Claimed and not yet recorded (or handed back): the leases the heartbeat keeps. */
  readonly held: Map<string, Held>;
  /** Per endpoint, the tail of its sequential sends. */
  readonly chains: Map<string, Promise<void>>;
  /** Outcomes waiting to be recorded. */
  readonly outcomes: RecordedAttempt[];
  /** The recording in progress (one transaction at a time). */
  recording: Promise<void> | null;
  /** The timer that lets outcomes gather before a recording starts. */
  linger: NodeJS.Timeout | null;
  /** Attempts about to be sent in this tick: stamped `sending_at` by one statement before any of them goes out. */
  sendingBatch: { ids: string[]; written: Promise<void> } | null;
  /** False once stop or kill begins: no more claims. */
  running: boolean;
  /** True after kill: nothing more is written. */
  killed: boolean;
  /** Ends the claim loop's current sleep. */
  wakeUp: (() => void) | null;
  /** A wake-up arrived since the loop last looked. */
  wakePending: boolean;
};

/**
 * Delivers webhooks from the queue until stopped. Any number of workers (in one process or
 * many, on one database) may run: claims use row locks with SKIP LOCKED and a lease.
 * Deliveries of one endpoint held by this worker are sent one after another in enqueue
 * order; different endpoints are served in parallel. Outcomes are recorded in batches:
 * those that finish while the previous batch commits go into the next transaction.
 *
 * The steps, each a function below: claimLoop -> claimBatch -> dispatch -> deliverOne
 * (stampSending, postWebhook) -> scheduleRecording -> flushOutcomes -> recordBatch -> release
 * (which wakes the claim loop); renewLeases on a timer; halt on stop or kill.
 */
export function startWebhookWorker(services: Services, opts: WebhookWorkerOptions = {}): WebhookWorker {
  const w = newWorkerState(services, opts);
  const { settings, log } = w;
  const unsubscribe = services.wake.onWake(() => wake(w));
  const heartbeat = setInterval(() => renewLeases(w), Math.max(50, Math.floor(settings.leaseMs / 3)));
  heartbeat.unref();
  const looping = claimLoop(w);
  log.info({ pollIntervalMs: settings.pollIntervalMs, leaseMs: settings.leaseMs }, 'webhook worker started');

  let stopping: Promise<void> | null = null;
  const shutdown = (mode: 'stop' | 'kill') => (stopping ??= halt(w, mode, { unsubscribe, heartbeat, looping }));
  return {
    owner: settings.owner,
    stop: () => shutdown('stop'),
    kill: () => shutdown('kill'),
    wake: () => wake(w),
  };
}

function newWorkerState(services: Services, opts: WebhookWorkerOptions): WorkerState {
  const batchSize = opts.batchSize ?? 50;
  const maxInFlight = opts.maxInFlight ?? 400;
  const owner = `${opts.name ?? hostname()}:${process.pid}:${randomBytes(6).toString('hex')}`;
  return {
    services,
    settings: {
      owner,
      pollIntervalMs: opts.pollIntervalMs ?? 500,
      batchSize,
      maxInFlight,
      leaseMs: opts.leaseMs ?? 30_000,
      timeoutMs: opts.timeoutMs ?? WEBHOOK_TIMEOUT_MS,
      retryScale: services.config.SVC_WEBHOOK_RETRY_SCALE,
      claimThreshold: Math.min(batchSize, maxInFlight),
    },
    log: services.log.child({ worker: owner }),
    agents: createAgents(),
    kill: new AbortController(),
    held: new Map(),
    chains: new Map(),
    outcomes: [],
    recording: null,
    linger: null,
    sendingBatch: null,
    running: true,
    killed: false,
    wakeUp: null,
    wakePending: false,
  };
}

/** A fresh entity manager per statement group (the worker shares no identity map between steps). */
const emOf = (w: WorkerState) => w.services.orm.em.fork();

// ---- claim ---------------------------------------------------------------------------------

/** Looks for due deliveries now instead of at the next poll. */
function wake(w: WorkerState): void {
  w.wakePending = true;
  w.wakeUp?.();
}

/** Waits `ms`, or less when woken (or at once when a wake-up is pending or the worker stops). */
function sleep(w: WorkerState, ms: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (w.wakePending || !w.running) return resolve();
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      w.wakeUp = null;
      resolve();
    }
    w.wakeUp = done;
  });
}

/**
 * Claims while there is room and work: straight on after a full batch, else after a poll
 * interval (or a wake-up); a failing claim backs off exponentially (at most 30 s).
 */
async function claimLoop(w: WorkerState): Promise<void> {
  const { batchSize, maxInFlight, claimThreshold, pollIntervalMs } = w.settings;
  let failures = 0;
  while (w.running) {
    w.wakePending = false;
    const room = Math.min(batchSize, maxInFlight - w.held.size);
    let claimed = 0;
    if (room >= claimThreshold) {
      try {
        const claims = await claimBatch(w, room);
        failures = 0;
        claimed = claims.length;
        if (w.killed) return;
        dispatch(w, claims);
      } catch (err) {
        failures += 1;
        w.log.error({ err }, 'webhook claim failed');
        await sleep(w, Math.min(pollIntervalMs * 2 ** failures, 30_000));
        continue;
      }
    }
    if (claimed > 0 && claimed === room) continue;
    await sleep(w, pollIntervalMs);
  }
}

/** One claim of up to `room` due deliveries (queue.ts claimDueDeliveries), leased to this worker. */
function claimBatch(w: WorkerState, room: number): Promise<ClaimedDelivery[]> {
  const { services, settings, log } = w;
  return claimDueDeliveries(emOf(w), services.box, services.now(), settings.owner, room, settings.leaseMs, (endpointId, err) =>
    log.error({ err, endpoint_id: endpointId }, 'cannot open a webhook secret (was SVC_MASTER_KEY changed?); its deliveries wait'),
  );
}

// ---- deliver -------------------------------------------------------------------------------

/** Holds the claims and chains each behind the sends already queued for its endpoint. */
function dispatch(w: WorkerState, claims: ClaimedDelivery[]): void {
  for (const claim of claims) {
    const h: Held = { claim, started: false, dropped: false };
    w.held.set(claim.deliveryId, h);
    const prev = w.chains.get(claim.endpointId) ?? Promise.resolve();
    const next = prev
      .then(() => deliverOne(w, h))
      .catch((err: unknown) => w.log.error({ err }, 'webhook delivery crashed'))
      .finally(() => {
        if (w.chains.get(claim.endpointId) === next) w.chains.delete(claim.endpointId);
      });
    w.chains.set(claim.endpointId, next);
  }
}

/** Sends one held claim (stamped as sending first) and queues its outcome for recording. */
async function deliverOne(w: WorkerState, h: Held): Promise<void> {
  if (h.dropped || w.killed) return;
  h.started = true;
  const c = h.claim;
  await stampSending(w, c.attemptId);
  if (w.killed) return;
  const outcome: AttemptOutcome = await postWebhook(attemptRequest(w, c), w.agents).catch((err: unknown) => ({
    ok: false,
    responseStatus: null,
    durationMs: 0,
    error: `could not send: ${String(err)}`,
  }));
  if (w.killed) return;
  w.outcomes.push({ claim: c, outcome });
  scheduleRecording(w);
}

/** The signed POST of one attempt (section 6 headers; signed at the injected clock's second). */
function attemptRequest(w: WorkerState, c: ClaimedDelivery): WebhookRequest {
  const t = unixSeconds(w.services.now());
  return {
    url: c.url,
    body: c.body,
    headers: {
      'Content-Type': 'application/json',
      'User-Agent': WEBHOOK_USER_AGENT,
      'Svc-Signature': signatureHeader(c.body, c.secrets, t),
      'Svc-Event-Id': c.eventId,
      'Svc-Delivery-Id': c.attemptId,
    },
    rules: outboundRules(w.services.config, c.livemode),
    timeoutMs: w.settings.timeoutMs,
    signal: w.kill.signal,
  };
}

/** Stamps `sending_at` for every attempt that starts in this tick with one statement; resolves when written. */
function stampSending(w: WorkerState, attemptId: string): Promise<void> {
  if (!w.sendingBatch) {
    const batch: { ids: string[]; written: Promise<void> } = { ids: [], written: Promise.resolve() };
    batch.written = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => {
        w.sendingBatch = null;
        return markSending(emOf(w), batch.ids);
      })
      // Sending anyway keeps at-least-once; only a crash right after would then miss its `lost` record.
      .catch((err: unknown) => w.log.error({ err, attempts: batch.ids.length }, 'could not stamp webhook attempts as sending'));
    w.sendingBatch = batch;
  }
  w.sendingBatch.ids.push(attemptId);
  return w.sendingBatch.written;
}

// ---- record --------------------------------------------------------------------------------

/** Starts a recording at once when a full batch waits, else after RECORD_LINGER_MS (unless one runs or is due). */
function scheduleRecording(w: WorkerState): void {
  if (w.recording || w.linger || w.outcomes.length === 0 || w.killed) return;
  if (w.outcomes.length >= RECORD_BATCH) return flushOutcomes(w);
  w.linger = setTimeout(() => flushOutcomes(w), RECORD_LINGER_MS);
}

/** Records queued outcomes, one transaction at a time, until none are left. */
function flushOutcomes(w: WorkerState): void {
  if (w.linger) clearTimeout(w.linger);
  w.linger = null;
  if (w.recording || w.outcomes.length === 0 || w.killed) return;
  w.recording = (async () => {
    while (w.outcomes.length > 0 && !w.killed) {
      const batch = w.outcomes.splice(0, RECORD_BATCH);
      await recordBatch(w, batch);
      if (w.killed) return;
      for (const { claim } of batch) release(w, claim.deliveryId);
    }
  })().finally(() => {
    w.recording = null;
    scheduleRecording(w);
  });
}

/** One batch of outcomes in one transaction (queue.ts recordAttempts), tried again after a deadlock; failures are logged. */
async function recordBatch(w: WorkerState, batch: RecordedAttempt[]): Promise<void> {
  const { settings, log } = w;
  try {
    for (let tries = 1; ; tries++) {
      try {
        await recordAttempts(emOf(w), settings.owner, batch, settings.retryScale);
        break;
      } catch (err) {
        if (!(err instanceof DeadlockException) || tries >= RECORD_TRIES || w.killed) throw err;
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
}

/** Lets go of a recorded claim; wakes the claim loop when a whole batch fits again. */
function release(w: WorkerState, deliveryId: string): void {
  const { maxInFlight, claimThreshold } = w.settings;
  const before = w.held.size;
  w.held.delete(deliveryId);
  if (before > maxInFlight - claimThreshold && w.held.size <= maxInFlight - claimThreshold) wake(w);
}

// ---- leases and stop -----------------------------------------------------------------------

/** The heartbeat: keeps the leases of everything held. */
function renewLeases(w: WorkerState): void {
  if (w.held.size === 0 || w.killed) return;
  extendLeases(emOf(w), w.settings.owner, w.settings.leaseMs).catch((err: unknown) => w.log.error({ err }, 'webhook lease renewal failed'));
}

/** Records what is queued, waiting for the recording in progress. */
async function drainRecording(w: WorkerState): Promise<void> {
  flushOutcomes(w);
  while (w.recording) await w.recording;
}

/**
 * Stops claiming, then: `stop` finishes and records the sends started, and hands back the
 * claims never sent; `kill` aborts the sends in flight and writes nothing more (as if the
 * process died). Then closes the HTTP agents.
 */
async function halt(
  w: WorkerState,
  mode: 'stop' | 'kill',
  run: { unsubscribe: () => void; heartbeat: NodeJS.Timeout; looping: Promise<void> },
): Promise<void> {
  w.running = false;
  run.unsubscribe();
  w.wakeUp?.();
  if (mode === 'kill') {
    w.killed = true;
    w.kill.abort();
    clearInterval(run.heartbeat);
    await run.looping;
    await Promise.allSettled([...w.chains.values()]);
    await drainRecording(w);
  } else {
    await run.looping;
    const unsent = [...w.held.values()].filter((h) => !h.started);
    for (const h of unsent) h.dropped = true;
    await Promise.allSettled([...w.chains.values()]);
    await drainRecording(w);
    clearInterval(run.heartbeat);
    await releaseClaims(emOf(w), w.settings.owner, unsent.map((h) => h.claim)).catch((err: unknown) => w.log.error({ err }, 'could not hand back unsent webhook claims'));
  }
  w.agents.http.destroy();
  w.agents.https.destroy();
  w.log.info({ mode }, 'webhook worker stopped');
}
