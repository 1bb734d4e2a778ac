import { unixSeconds } from '../../lib/time.js';
import { facilitatorFor } from '../../rails/index.js';
import type { Services } from '../../http/context.js';
import { lapsedSessionIds, lockSessionIfAny, paymentWindowLapsed, reviewWindowLapsed, sweepRateLimitBuckets } from '../checkout/index.js';
import { findMerchantByIdOrFail } from '../merchants/index.js';
import { broadcastsOf, resolveAttempt } from './engine.js';
import { rejectHeld } from './finish.js';
import { reconcileRefunds } from './refunds.js';
import { attemptById, claimDueAttempts, extendPendingLease } from './store.js';
import { RepeatLimiter } from '../../lib/log-limit.js';

export type SettlementWorker = { stop(): Promise<void>; runOnce(): Promise<void> };

/** While the reconciler reads the chain for an attempt, no other worker takes it. */
const CLAIM_LEASE_SECONDS = 30;
/** A chain read that says "still pending" is looked at again this soon. */
const RECHECK_MS = 1_000;
const BATCH = 25;
/** Housekeeping (expired rate-limit windows) runs at most this often per worker. */
const HOUSEKEEPING_MS = 60_000;

/**
 * The settlement worker (docs/settlement.md): finishes every attempt left `pending` past its
 * lease (a settle that timed out, a crash or kill -9 between phases) by reading the chain,
 * and sweeps holds whose review window lapsed and approvals nobody re-signed; once a minute it
 * deletes expired rate-limit windows. Refunds get the same care (refunds.ts `reconcileRefunds`):
 * pending ones past their lease are finished from the chain, unsigned ones past their window
 * canceled. Any number may run on one database: claims use row locks with SKIP LOCKED and a
 * lease, and the housekeeping deletes are idempotent.
 */
export function startSettlementWorker(services: Services, opts: { intervalMs?: number } = {}): SettlementWorker {
  const intervalMs = opts.intervalMs ?? services.config.SVC_RECONCILE_INTERVAL_MS;
  const log = services.log.child({ worker: 'settlement' });
  let running = true;
  let current: Promise<void> = Promise.resolve();
  let timer: NodeJS.Timeout | null = null;

  let housekept = -Infinity;
  // A chain that stays wrong fails every attempt every pass: its cause is logged once a minute.
  const retryWarnings = new RepeatLimiter(60_000);
  const runOnce = async () => {
    await reconcileDue(services, log, retryWarnings);
    await sweepLapsed(services, log);
    await reconcileRefunds(services, log, BATCH);
    const now = services.now().getTime();
    if (now - housekept >= HOUSEKEEPING_MS || now < housekept) {
      housekept = now;
      await sweepRateLimitBuckets(services);
    }
  };
  const tick = () => {
    if (!running) return;
    current = runOnce()
      .catch((err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'settlement worker pass failed'))
      .finally(() => {
        if (running) timer = setTimeout(tick, intervalMs);
      });
  };
  tick();
  return {
    runOnce,
    async stop() {
      running = false;
      if (timer) clearTimeout(timer);
      await current;
    },
  };
}

async function reconcileDue(services: Services, log: Services['log'], retryWarnings: RepeatLimiter) {
  const claimed = await services.orm.em.fork().transactional((tx) => claimDueAttempts(tx, CLAIM_LEASE_SECONDS, BATCH));
  for (const id of claimed) {
    const em = services.orm.em.fork();
    const a = await attemptById(em, id);
    if (a.status !== 'pending') continue;
    const facilitator = facilitatorFor(services.facilitators, a.livemode);
    if (facilitator.name !== a.facilitator) {
      log.warn({ attempt: a.id, recorded: a.facilitator, configured: facilitator.name }, 'attempt was started by another facilitator; reconciling with the configured one');
    }
    try {
      const outcome = a.proof
        ? await facilitator.reconcile({ proof: a.proof, broadcasts: await broadcastsOf(em, a.id), nowSec: unixSeconds(services.now()) })
        : ({ status: 'failed', code: 'CAPTURE_FAILED', human: 'The settlement was interrupted before anything was sent.' } as const);
      const result = await resolveAttempt(services, a.id, outcome);
      if (result.kind !== 'pending') log.info({ attempt: a.id, session: a.sessionId, outcome: result.kind }, 'settlement attempt reconciled');
    } catch (err) {
      const cause = err instanceof Error ? err.message : String(err);
      const heldBack = retryWarnings.pass(cause);
      if (heldBack !== null) log.warn({ attempt: a.id, err: cause, heldBack }, 'reconcile failed; will retry');
      await extendPendingLease(em, a.id, new Date(services.now().getTime() + RECHECK_MS));
    }
  }
}

/** Holds past their review window and approvals past their re-sign window are rejected with order.rejected. */
async function sweepLapsed(services: Services, log: Services['log']) {
  const now = services.now();
  const em = services.orm.em.fork();
  const lapsed = await lapsedSessionIds(em, now, BATCH);
  for (const { id } of lapsed) {
    await services.orm.em.fork().transactional(async (tx) => {
      const s = await lockSessionIfAny(tx, id);
      if (!s) return;
      const heldLapsed = reviewWindowLapsed(s, now);
      const approvalLapsed = s.state === 'approved' && paymentWindowLapsed(s, now);
      if (!heldLapsed && !approvalLapsed) return;
      const m = await findMerchantByIdOrFail(tx, s.merchantId);
      await rejectHeld({ tx, services, merchant: m, session: s, code: heldLapsed ? 'REVIEW_WINDOW_EXPIRED' : 'SESSION_EXPIRED', penalize: false });
      log.info({ session: s.id, reason: heldLapsed ? 'review window lapsed' : 'approval not re-signed in time' }, 'lapsed session rejected');
    });
  }
}
