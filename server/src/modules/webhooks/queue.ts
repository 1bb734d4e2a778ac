import { WEBHOOK_RETRY_SCHEDULE_MS } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { SecretBox } from '../../lib/crypto.js';
import { newId } from '../../lib/ids.js';
import type { AttemptOutcome } from './deliver.js';
import {
  cancelDeliveries,
  cancelUnheldDeliveriesOf,
  closeExpiredAttempts,
  completeAttempts,
  finishDeliveries,
  insertAttempts,
  leaseDeliveries,
  lockDeliveries,
  lockDueDeliveries,
  lockEndpointsForDeliveryWrites,
  markEndpointsFailing,
  markEndpointsSucceeding,
  readClaimEndpoints,
  readEventBodies,
  rescheduleDeliveries,
  type AttemptResultRow,
  type ClaimEndpointRow,
  type DueDeliveryRow,
} from './store.js';

/**
 * The delivery queue's rules, as the worker (worker.ts) uses them: what a claim sends and
 * cancels, which secrets sign, how a delivery moves on after an attempt, and how an endpoint's
 * health follows its outcomes. The statements, their locks and the lock order are store.ts's.
 */

/** Section 6: delay of each attempt from enqueue (attempt 1 is immediate); the contract states it. */
export const RETRY_SCHEDULE_MS = WEBHOOK_RETRY_SCHEDULE_MS;
export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length;
/** Section "Webhooks" of decisions.md: an endpoint failing for this long is disabled. */
export const AUTO_DISABLE_AFTER = '5 days';

export type ClaimedDelivery = {
  deliveryId: string;
  attemptId: string;
  attemptNumber: number;
  eventId: string;
  endpointId: string;
  url: string;
  livemode: boolean;
  body: string;
  secrets: string[];
};

/**
 * Claims up to `limit` due deliveries for `owner`, opening one attempt row each. Deliveries
 * to disabled or deleted endpoints are canceled instead. A secret that cannot be opened
 * (a changed SVC_MASTER_KEY) leaves its deliveries unclaimed and is reported to `onSecretError`.
 * One short transaction (store.ts: lock, hand back expired leases, read, cancel, lease, open attempts).
 */
export async function claimDueDeliveries(
  em: Em,
  box: SecretBox,
  now: Date,
  owner: string,
  limit: number,
  leaseMs: number,
  onSecretError: (endpointId: string, err: unknown) => void = () => undefined,
): Promise<ClaimedDelivery[]> {
  return em.transactional(async (tx) => {
    const due = await lockDueDeliveries(tx, limit);
    if (due.length === 0) return [];
    await closeExpiredAttempts(tx, due.filter((d) => d.leased).map((d) => String(d.id)));
    const endpoints = await readClaimEndpoints(tx, [...new Set(due.map((d) => d.endpoint_id))]);
    const bodies = await readEventBodies(tx, [...new Set(due.map((d) => d.event_id))]);
    const { live, canceled, secretsOf } = sortDue(due, endpoints, (e) => openSecrets(box, e, now, onSecretError));
    await cancelDeliveries(tx, canceled);
    if (live.length === 0) return [];
    await leaseDeliveries(tx, live.map((d) => String(d.id)), owner, leaseMs);
    const byId = new Map(endpoints.map((e) => [e.id, e]));
    const bodyOf = new Map(bodies.map((b) => [b.id, b.body]));
    const claimed = live.map((d): ClaimedDelivery => {
      const e = byId.get(d.endpoint_id)!;
      return {
        deliveryId: String(d.id),
        attemptId: newId('wha'),
        attemptNumber: d.attempt_count + 1,
        eventId: d.event_id,
        endpointId: e.id,
        url: e.url,
        livemode: e.livemode,
        body: bodyOf.get(d.event_id) ?? '',
        secrets: secretsOf.get(e.id)!,
      };
    });
    await insertAttempts(tx, claimed);
    return claimed;
  });
}

/**
 * Splits due deliveries: those of a missing, deleted or disabled endpoint are canceled; those
 * whose endpoint's secrets open are sent; the rest (a secret that does not open) wait. Each
 * endpoint's secrets are opened once.
 */
function sortDue(
  due: DueDeliveryRow[],
  endpoints: ClaimEndpointRow[],
  secretsOfEndpoint: (e: ClaimEndpointRow) => string[] | null,
): { live: DueDeliveryRow[]; canceled: string[]; secretsOf: Map<string, string[] | null> } {
  const byId = new Map(endpoints.map((e) => [e.id, e]));
  const secretsOf = new Map<string, string[] | null>();
  const live: DueDeliveryRow[] = [];
  const canceled: string[] = [];
  for (const d of due) {
    const e = byId.get(d.endpoint_id);
    if (!e || e.deleted_at || e.status === 'disabled') {
      canceled.push(String(d.id));
      continue;
    }
    if (!secretsOf.has(e.id)) secretsOf.set(e.id, secretsOfEndpoint(e));
    if (secretsOf.get(e.id)) live.push(d);
  }
  return { live, canceled, secretsOf };
}

/**
 * The secrets that sign an endpoint's deliveries: its current one, and the replaced one while
 * a rotation's overlap lasts. `now` is the injected clock, which also wrote
 * previous_secret_expires_at (rotation). Null (reported) when a secret does not open.
 */
function openSecrets(box: SecretBox, e: ClaimEndpointRow, now: Date, onSecretError: (endpointId: string, err: unknown) => void): string[] | null {
  try {
    const secrets = [box.open(e.secret_sealed, e.id)];
    if (e.previous_secret_sealed && e.previous_secret_expires_at && new Date(e.previous_secret_expires_at) > now) {
      secrets.push(box.open(e.previous_secret_sealed, e.id));
    }
    return secrets;
  } catch (err) {
    onSecretError(e.id, err);
    return null;
  }
}

export type RecordedAttempt = { claim: ClaimedDelivery; outcome: AttemptOutcome };

/**
 * Records attempt outcomes in one short transaction (a worker batches the outcomes that
 * finish while its previous batch commits) and moves each delivery on: succeeded,
 * rescheduled per the section 6 table (times `retryScale`) from enqueue, or permanently
 * failed after the seventh attempt. Delivery updates are fenced by `lock_owner`, so a
 * worker whose lease was taken over, or whose delivery a disable or delete canceled,
 * cannot overwrite that state; the attempt itself keeps the outcome that really happened.
 * Endpoint health follows each endpoint's latest outcome: pending -> enabled on a 2xx,
 * disabled once its failures started more than five days ago (AUTO_DISABLE_AFTER), which
 * cancels its pending deliveries no worker holds. Locks: the endpoints, the deliveries, then
 * the attempts (the order at the top of store.ts).
 */
export async function recordAttempts(em: Em, owner: string, items: RecordedAttempt[], retryScale: number): Promise<void> {
  if (items.length === 0) return;
  await em.transactional(async (tx) => {
    await lockEndpointsForDeliveryWrites(tx, items.map((i) => i.claim.endpointId));
    await lockDeliveries(tx, items.map((i) => i.claim.deliveryId));
    await completeAttempts(tx, items.map(attemptResult));
    const next = nextDeliveryStates(items, retryScale);
    await finishDeliveries(tx, owner, 'succeeded', next.succeeded);
    await finishDeliveries(tx, owner, 'failed', next.exhausted);
    await rescheduleDeliveries(tx, owner, next.retried);
    const health = endpointHealth(items);
    await markEndpointsSucceeding(tx, health.healthy);
    const disabled = await markEndpointsFailing(tx, health.failing, AUTO_DISABLE_AFTER);
    await cancelUnheldDeliveriesOf(tx, disabled);
  });
}

/** An attempt's stored result (the error text cut to 1000 characters). */
function attemptResult({ claim, outcome }: RecordedAttempt): AttemptResultRow {
  return [claim.attemptId, outcome.ok ? 'succeeded' : 'failed', outcome.responseStatus, outcome.durationMs, outcome.error?.slice(0, 1000) ?? null];
}

/** Section 6: a 2xx ends a delivery; a failure schedules the next attempt from enqueue, until the seventh fails for good. */
function nextDeliveryStates(items: RecordedAttempt[], retryScale: number) {
  const ended = (i: RecordedAttempt): [string, number] => [i.claim.deliveryId, i.claim.attemptNumber];
  return {
    succeeded: items.filter((i) => i.outcome.ok).map(ended),
    exhausted: items.filter((i) => !i.outcome.ok && i.claim.attemptNumber >= MAX_ATTEMPTS).map(ended),
    retried: items
      .filter((i) => !i.outcome.ok && i.claim.attemptNumber < MAX_ATTEMPTS)
      .map((i): [string, number, number] => [i.claim.deliveryId, i.claim.attemptNumber, RETRY_SCHEDULE_MS[i.claim.attemptNumber]! * retryScale]),
  };
}

/** Each endpoint's health follows its latest outcome in the batch. */
function endpointHealth(items: RecordedAttempt[]): { healthy: string[]; failing: string[] } {
  const latest = new Map<string, boolean>();
  for (const i of items) latest.set(i.claim.endpointId, i.outcome.ok);
  return {
    healthy: [...latest].filter(([, ok]) => ok).map(([id]) => id),
    failing: [...latest].filter(([, ok]) => !ok).map(([id]) => id),
  };
}
