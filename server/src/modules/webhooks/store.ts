import { LockMode, type RequiredEntityData } from '@mikro-orm/core';
import type { Em } from '../../db/orm.js';
import { runSql } from '../../db/sql.js';
import { WebhookEndpointEntity, type WebhookEndpointRow } from './entity.js';

/**
 * The one data access of the webhooks module: `webhook_endpoints` (an entity, ./entity.ts, read
 * and written through the ORM by the API, and in batched SQL by the queue), and the queue tables
 * reached with SQL, `webhook_deliveries`, `webhook_attempts` and `webhook_event_bodies`. No
 * rules here: which deliveries are canceled, which secrets sign, how a delivery moves on and
 * how healthy an endpoint is are decided in queue.ts (the worker's) and service.ts (the API's).
 *
 * The delivery queue in PostgreSQL (identical on PGlite): a due row is claimed with
 * FOR UPDATE SKIP LOCKED and leased (`locked_until`, `lock_owner`), so any number of
 * workers send each attempt once, and a worker that dies leaves a lease that expires.
 * Every statement here runs in a short transaction; no transaction spans an HTTP call.
 * The queue runs on the database's clock on purpose (now()): leases, due times and the
 * failing window are written by one worker process and compared by another.
 *
 * Lock order (no deadlock between the API and the workers): a transaction that changes an
 * endpoint's deliveries or attempts as a whole (disable, delete, recording outcomes, the
 * automatic disable) locks the endpoint row first (`lockEndpointsForDeliveryWrites`, or
 * `findWebhookEndpoint(..., { lock: true })` on the API), then deliveries, then attempts;
 * several rows of one table are locked in id order. The claim only takes unlocked
 * deliveries (SKIP LOCKED) and reads endpoints without locking them.
 */

// ---- endpoints (the API, service.ts) ----

export type EndpointScope = { projectId: string; livemode: boolean };

/** Endpoints of a project and mode that are not deleted (MAX_ENDPOINTS counts them). */
export async function countLiveEndpoints(tx: Em, scope: EndpointScope): Promise<number> {
  return tx.count(WebhookEndpointEntity, { projectId: scope.projectId, livemode: scope.livemode, deletedAt: null });
}

/** Inserts an endpoint row (flushed at once, in the caller's transaction). */
export async function insertEndpoint(tx: Em, row: RequiredEntityData<WebhookEndpointRow>): Promise<WebhookEndpointRow> {
  const e = tx.create(WebhookEndpointEntity, row);
  await tx.flush();
  return e;
}

/**
 * An endpoint of the scope by id, not deleted, or null. `lock` takes the row FOR UPDATE (in a
 * transaction): the endpoint comes first in the lock order at the top of this file.
 */
export async function findEndpointRow(em: Em, scope: EndpointScope, id: string, opts: { lock?: boolean } = {}): Promise<WebhookEndpointRow | null> {
  return em.findOne(
    WebhookEndpointEntity,
    { id, projectId: scope.projectId, livemode: scope.livemode, deletedAt: null },
    opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
  );
}

/** Endpoints of the scope, not deleted, newest first; `beforeId` continues a page. */
export async function listEndpointRows(em: Em, scope: EndpointScope, q: { limit: number; beforeId?: string | undefined }): Promise<WebhookEndpointRow[]> {
  const where: Record<string, unknown> = { projectId: scope.projectId, livemode: scope.livemode, deletedAt: null };
  if (q.beforeId) where.id = { $lt: q.beforeId };
  return em.find(WebhookEndpointEntity, where, { orderBy: { id: 'desc' }, limit: q.limit });
}

/** Writes the changes made to loaded endpoint rows (update, delete, rotate). */
export async function saveEndpoints(tx: Em): Promise<void> {
  await tx.flush();
}

export type DueDeliveryRow = { id: string | number; event_id: string; endpoint_id: string; attempt_count: number; leased: boolean };
/** What a claim reads of an endpoint: where to send, and its sealed secrets (opened by the queue, queue.ts). */
export type ClaimEndpointRow = {
  id: string;
  url: string;
  livemode: boolean;
  status: string;
  deleted_at: unknown;
  secret_sealed: string;
  previous_secret_sealed: string | null;
  previous_secret_expires_at: string | Date | null;
};

const LOST_ERROR = 'the worker stopped before recording a result; the attempt was sent again after its lease expired';

// ---- the claim (queue.ts claimDueDeliveries runs these in one transaction, in this order) ----

/** Due pending deliveries, oldest first, locked for the claim (rows another claim holds are skipped). */
export async function lockDueDeliveries(tx: Em, limit: number): Promise<DueDeliveryRow[]> {
  return tx.execute<DueDeliveryRow[]>(
    `select d.id, d.event_id, d.endpoint_id, d.attempt_count, (d.locked_until is not null) as leased
       from webhook_deliveries d
       where d.status = 'pending' and d.next_attempt_at <= now() and (d.locked_until is null or d.locked_until <= now())
       order by d.next_attempt_at, d.id
       limit ?
       for update skip locked`,
    [limit],
  );
}

/**
 * The in-progress attempts of deliveries whose lease ran out: only an attempt whose send had
 * started may have reached the receiver, so that one is recorded `lost`; claimed-but-unsent
 * attempts vanish, as if handed back, and the delivery is simply retried.
 */
export async function closeExpiredAttempts(tx: Em, deliveryIds: string[]): Promise<void> {
  if (deliveryIds.length === 0) return;
  await tx.execute(
    `update webhook_attempts set status = 'lost', error = ?, completed_at = now() where delivery_id in (?) and status = 'in_progress' and sending_at is not null`,
    [LOST_ERROR, deliveryIds],
  );
  await tx.execute(`delete from webhook_attempts where delivery_id in (?) and status = 'in_progress' and sending_at is null`, [deliveryIds]);
}

/** The endpoints of claimed deliveries (read without locking them: the lock order at the top). */
export async function readClaimEndpoints(tx: Em, endpointIds: string[]): Promise<ClaimEndpointRow[]> {
  return tx.execute<ClaimEndpointRow[]>(
    `select id, url, livemode, status, deleted_at, secret_sealed, previous_secret_sealed, previous_secret_expires_at
       from webhook_endpoints where id in (?)`,
    [endpointIds],
  );
}

/** The bytes each event is delivered as: its frozen body, else its stored payload. */
export async function readEventBodies(tx: Em, eventIds: string[]): Promise<Array<{ id: string; body: string }>> {
  return tx.execute<Array<{ id: string; body: string }>>(
    `select e.id, coalesce(b.body, e.payload::text) as body from events e left join webhook_event_bodies b on b.event_id = e.id where e.id in (?)`,
    [eventIds],
  );
}

/** Ends deliveries (locked by the caller) as canceled. */
export async function cancelDeliveries(tx: Em, deliveryIds: string[]): Promise<void> {
  if (deliveryIds.length === 0) return;
  await tx.execute(
    `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null where id in (?)`,
    [deliveryIds],
  );
}

/** Leases deliveries (locked by the caller) to `owner` for `leaseMs`. */
export async function leaseDeliveries(tx: Em, deliveryIds: string[], owner: string, leaseMs: number): Promise<void> {
  await tx.execute(`update webhook_deliveries set locked_until = now() + ? * interval '1 millisecond', lock_owner = ? where id in (?)`, [
    leaseMs,
    owner,
    deliveryIds,
  ]);
}

export type NewAttemptRow = { attemptId: string; deliveryId: string; eventId: string; endpointId: string; attemptNumber: number };

/** Opens one in-progress attempt row each. */
export async function insertAttempts(tx: Em, rows: NewAttemptRow[]): Promise<void> {
  const values = rows.map(() => `(?, ?, ?, ?, ?, 'in_progress')`).join(', ');
  await tx.execute(
    `insert into webhook_attempts (id, delivery_id, event_id, endpoint_id, attempt_number, status) values ${values}`,
    rows.flatMap((c) => [c.attemptId, c.deliveryId, c.eventId, c.endpointId, c.attemptNumber]),
  );
}

// ---- recording outcomes (queue.ts recordAttempts runs these in one transaction, in this order) ----

const values = (rows: unknown[][]) => rows.map((r) => `(${r.map(() => '?').join(', ')})`).join(', ');

/**
 * Locks endpoint rows (in id order) before their deliveries and attempts are written: the
 * API's disable and delete take the same rows first (FOR UPDATE), so the two never hold one
 * lock each while waiting for the other's. FOR NO KEY UPDATE: a settle's fan-out, which only
 * references the endpoint (FOR KEY SHARE through the foreign key), does not wait for it.
 */
export async function lockEndpointsForDeliveryWrites(tx: Em, endpointIds: string[]): Promise<void> {
  await tx.execute(`select id from webhook_endpoints where id in (?) order by id for no key update`, [[...new Set(endpointIds)]]);
}

/** Locks delivery rows in id order (two transactions locking overlapping sets never cross). */
export async function lockDeliveries(tx: Em, deliveryIds: string[]): Promise<void> {
  await tx.execute(`select id from webhook_deliveries where id in (?) order by id for update`, [deliveryIds]);
}

/** One finished attempt: what the receiver answered (or why nothing did). */
export type AttemptResultRow = [id: string, status: 'succeeded' | 'failed', responseStatus: number | null, durationMs: number, error: string | null];

/** Writes finished attempts' results (every row of `rows` in one statement). */
export async function completeAttempts(tx: Em, rows: AttemptResultRow[]): Promise<void> {
  await tx.execute(
    `update webhook_attempts a
       set status = v.status, response_status = v.response_status::int, duration_ms = v.duration_ms::int, error = v.error, completed_at = now()
       from (values ${values(rows)}) as v(id, status, response_status, duration_ms, error)
       where a.id = v.id`,
    rows.flat(),
  );
}

/**
 * Ends deliveries (`[delivery id, attempt count]`) as `status`, fenced by `lock_owner`: a worker
 * whose lease was taken over, or whose delivery a disable or delete canceled, changes nothing.
 */
export async function finishDeliveries(tx: Em, owner: string, status: 'succeeded' | 'failed', rows: Array<[deliveryId: string, attemptCount: number]>): Promise<void> {
  if (rows.length === 0) return;
  await tx.execute(
    `update webhook_deliveries d
         set status = '${status}', attempt_count = v.n::int, completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
         from (values ${values(rows)}) as v(id, n)
         where d.id = v.id::bigint and d.lock_owner = ?`,
    [...rows.flat(), owner],
  );
}

/** Schedules deliveries (`[delivery id, attempt count, delay from enqueue in ms]`) again, fenced by `lock_owner` like finishDeliveries. */
export async function rescheduleDeliveries(tx: Em, owner: string, rows: Array<[deliveryId: string, attemptCount: number, delayMs: number]>): Promise<void> {
  if (rows.length === 0) return;
  await tx.execute(
    `update webhook_deliveries d
         set attempt_count = v.n::int, next_attempt_at = d.enqueued_at + v.delay_ms::double precision * interval '1 millisecond', locked_until = null, lock_owner = null
         from (values ${values(rows)}) as v(id, n, delay_ms)
         where d.id = v.id::bigint and d.lock_owner = ?`,
    [...rows.flat(), owner],
  );
}

/**
 * Endpoints whose latest outcome succeeded: pending -> enabled, no longer failing. The write is
 * skipped when nothing would change, so busy endpoints do not serialize workers on one row.
 */
export async function markEndpointsSucceeding(tx: Em, endpointIds: string[]): Promise<void> {
  if (endpointIds.length === 0) return;
  await tx.execute(
    `update webhook_endpoints
         set status = case when status = 'pending' then 'enabled' else status end,
             failing_since = null, last_success_at = now()
         where id in (?) and (status = 'pending' or failing_since is not null or last_success_at is null or last_success_at < now() - interval '1 minute')`,
    [endpointIds],
  );
}

/**
 * Endpoints whose latest outcome failed: failing from now unless already, and disabled
 * (reason `failing`) once failing for longer than `disableAfter` (an SQL interval, compared on
 * the database's clock). Returns the ids of those now disabled.
 */
export async function markEndpointsFailing(tx: Em, endpointIds: string[], disableAfter: string): Promise<string[]> {
  if (endpointIds.length === 0) return [];
  const rows = await tx.execute<Array<{ id: string; status: string }>>(
    `update webhook_endpoints
         set failing_since = coalesce(failing_since, now()),
             status = case when failing_since <= now() - interval '${disableAfter}' then 'disabled' else status end,
             disabled_reason = case when failing_since <= now() - interval '${disableAfter}' and status <> 'disabled' then 'failing' else disabled_reason end
         where id in (?)
         returning id, status`,
    [endpointIds],
  );
  return rows.filter((e) => e.status === 'disabled').map((e) => e.id);
}

/** Cancels the pending deliveries no worker holds of endpoints just disabled (rows locked in id order). */
export async function cancelUnheldDeliveriesOf(tx: Em, endpointIds: string[]): Promise<void> {
  if (endpointIds.length === 0) return;
  await tx.execute(
    `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
           where id in (select id from webhook_deliveries where endpoint_id in (?) and status = 'pending' and lock_owner is null order by id for update)`,
    [endpointIds],
  );
}

/**
 * Stamps attempts as going on the wire, just before their requests are sent (one statement
 * for every send that starts in the same tick). A reclaimed lease records `lost` only for these.
 */
export async function markSending(em: Em, attemptIds: string[]): Promise<void> {
  if (attemptIds.length === 0) return;
  await em.execute(
    `update webhook_attempts set sending_at = now() where id in (select id from webhook_attempts where id in (?) and status = 'in_progress' order by id for update)`,
    [attemptIds],
  );
}

/** Keeps the leases of everything this worker still holds (rows locked in id order). */
export async function extendLeases(em: Em, owner: string, leaseMs: number): Promise<void> {
  await em.execute(
    `update webhook_deliveries set locked_until = now() + ? * interval '1 millisecond'
     where id in (select id from webhook_deliveries where lock_owner = ? and status = 'pending' order by id for update)`,
    [leaseMs, owner],
  );
}

/** Hands back claimed deliveries that were never sent (graceful stop): due again at once. */
export async function releaseClaims(em: Em, owner: string, claims: Array<{ attemptId: string; deliveryId: string }>): Promise<void> {
  if (claims.length === 0) return;
  await em.transactional(async (tx) => {
    await tx.execute(`delete from webhook_attempts where id in (?) and status = 'in_progress'`, [claims.map((c) => c.attemptId)]);
    await tx.execute(`update webhook_deliveries set locked_until = null, lock_owner = null where id in (?) and lock_owner = ?`, [
      claims.map((c) => c.deliveryId),
      owner,
    ]);
  });
}

/**
 * Cancels an endpoint's pending deliveries and marks its attempts in flight lost (disable,
 * delete), in the caller's transaction, which has locked the endpoint row first. Deliveries,
 * then attempts, each in id order. A worker that was sending one of them still records what
 * its receiver answered on the attempt; the delivery stays canceled.
 */
export async function cancelPendingDeliveries(tx: Em, endpointId: string, why: string): Promise<void> {
  await tx.execute(
    `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
     where id in (select id from webhook_deliveries where endpoint_id = ? and status = 'pending' order by id for update)`,
    [endpointId],
  );
  await tx.execute(
    `update webhook_attempts set status = 'lost', error = ?, completed_at = now()
     where id in (select id from webhook_attempts where endpoint_id = ? and status = 'in_progress' order by id for update)`,
    [why, endpointId],
  );
}

/**
 * One pending delivery per matching endpoint: same project and mode, not deleted, not
 * disabled, and `enabled_events` holding the type or "*" (one insert-select on the settle
 * path, whatever the number of endpoints). Returns the endpoint ids.
 */
export async function enqueueDeliveries(tx: Em, ev: { id: string; type: string; projectId: string; livemode: boolean }, replay: boolean): Promise<string[]> {
  const rows = await tx.execute<Array<{ endpoint_id: string }>>(
    `insert into webhook_deliveries (event_id, endpoint_id, replay, status, enqueued_at, next_attempt_at)
     select ?, e.id, ?, 'pending', now(), now() from webhook_endpoints e
     where e.project_id = ? and e.livemode = ? and e.deleted_at is null and e.status <> 'disabled'
       and (e.enabled_events @> '["*"]'::jsonb or e.enabled_events @> ?::jsonb)
     order by e.id
     returning endpoint_id`,
    [ev.id, replay, ev.projectId, ev.livemode, JSON.stringify([ev.type])],
  );
  return rows.map((r) => r.endpoint_id);
}

/**
 * The one delivery of a `webhook_endpoint.test` event: to the endpoint tested (same project and
 * mode, not deleted, not disabled), whatever its `enabled_events`. Returns the endpoint ids (one or none).
 */
export async function enqueueTestDelivery(tx: Em, ev: { id: string; endpointId: string; projectId: string; livemode: boolean }, replay: boolean): Promise<string[]> {
  const rows = await tx.execute<Array<{ endpoint_id: string }>>(
    `insert into webhook_deliveries (event_id, endpoint_id, replay, status, enqueued_at, next_attempt_at)
     select ?, e.id, ?, 'pending', now(), now() from webhook_endpoints e
     where e.id = ? and e.project_id = ? and e.livemode = ? and e.deleted_at is null and e.status <> 'disabled'
     returning endpoint_id`,
    [ev.id, replay, ev.endpointId, ev.projectId, ev.livemode],
  );
  return rows.map((r) => r.endpoint_id);
}

/**
 * Endpoints of a project and mode (not deleted) that are failing: their latest finished attempt
 * (succeeded or failed; in-flight and lost attempts say nothing about the receiver) failed, or
 * one of their deliveries failed for good (seven attempts). The summary's `failing_endpoints`.
 */
export async function countFailingEndpoints(em: Em, scope: { projectId: string; livemode: boolean }): Promise<number> {
  const rows = await em.execute<Array<{ n: string | number }>>(
    `select count(*) as n from webhook_endpoints e
     where e.project_id = ? and e.livemode = ? and e.deleted_at is null
       and (exists (select 1 from webhook_deliveries d where d.endpoint_id = e.id and d.status = 'failed')
            or (select a.status from webhook_attempts a
                 where a.endpoint_id = e.id and a.status in ('succeeded', 'failed')
                 order by a.created_at desc, a.id desc limit 1) = 'failed')`,
    [scope.projectId, scope.livemode],
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * The webhook fan-out, run in the statement that records the events (events/store.ts
 * `insertEvents`, over its `ev` rows): one pending delivery per matching endpoint (same
 * project and mode, not deleted, not disabled, `enabled_events` holding the type or "*"; a
 * `webhook_endpoint.test` event only to the endpoint it tested), and the exact bytes of each
 * event that has a delivery (`webhook_event_bodies`; an event nobody receives stores none, and
 * a later replay freezes them then: freezeEventBody). Ends in `fanned(event_id, endpoint_id)`.
 */
export const EVENT_FAN_OUT_CTES = `fanned as (
       insert into webhook_deliveries (event_id, endpoint_id, replay, status, enqueued_at, next_attempt_at)
       select ev.id, e.id, false, 'pending', now(), now() from ev join webhook_endpoints e
         on e.project_id = ev.project_id and e.livemode = ev.livemode and e.deleted_at is null and e.status <> 'disabled'
        and (case when ev.only_endpoint is not null then e.id = ev.only_endpoint
                  else e.enabled_events @> '["*"]'::jsonb or e.enabled_events @> jsonb_build_array(ev.type) end)
       order by ev.ord, e.id
       returning event_id, endpoint_id),
     bodies as (
       insert into webhook_event_bodies (event_id, body)
       select ev.id, ev.body from ev where ev.id in (select event_id from fanned))`;

/**
 * An event no endpoint received when it was recorded (or recorded before webhooks existed) has
 * no stored bytes yet: stores `bytes` (events/service.ts `EventOutbox.bytesOfStoredEvent`) unless some are.
 */
export async function freezeEventBody(tx: Em, eventId: string, bytes: string): Promise<void> {
  await runSql(tx, 'insert into webhook_event_bodies (event_id, body) values ($1, $2) on conflict (event_id) do nothing', [eventId, bytes]);
}

export type DeliveryRow = {
  id: string | number;
  endpoint_id: string;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled';
  replay: boolean;
  attempt_count: number;
  next_attempt_at: string | Date | null;
  enqueued_at: string | Date;
};
export type AttemptRow = {
  id: string;
  delivery_id: string | number;
  attempt_number: number;
  status: 'in_progress' | 'succeeded' | 'failed' | 'lost';
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  created_at: string | Date;
  completed_at: string | Date | null;
};

export async function listDeliveriesOfEvent(em: Em, eventId: string): Promise<DeliveryRow[]> {
  return em.execute<DeliveryRow[]>(
    'select id, endpoint_id, status, replay, attempt_count, next_attempt_at, enqueued_at from webhook_deliveries where event_id = ? order by id',
    [eventId],
  );
}

export async function listAttemptsOfEvent(em: Em, eventId: string): Promise<AttemptRow[]> {
  return em.execute<AttemptRow[]>(
    `select id, delivery_id, attempt_number, status, response_status, duration_ms, error, created_at, completed_at
     from webhook_attempts where event_id = ? order by created_at, id`,
    [eventId],
  );
}

/** The queue as `GET /metrics` reports it (on the database's clock, like the queue itself). */
export type WebhookQueueStats = { dueNow: number; later: number; oldestDueAgeSeconds: number };

/**
 * Pending deliveries due now and scheduled later, and how long the oldest due one has waited
 * (0 when none is due). One statement over the partial index of pending rows.
 */
export async function webhookQueueStats(em: Em): Promise<WebhookQueueStats> {
  const [row] = await em.execute<Array<{ due: string | number; later: string | number; age: string | number | null }>>(
    `select count(*) filter (where next_attempt_at is null or next_attempt_at <= now()) as due,
            count(*) filter (where next_attempt_at > now()) as later,
            extract(epoch from now() - min(coalesce(next_attempt_at, enqueued_at))
              filter (where next_attempt_at is null or next_attempt_at <= now())) as age
       from webhook_deliveries where status = 'pending'`,
  );
  return { dueNow: Number(row?.due ?? 0), later: Number(row?.later ?? 0), oldestDueAgeSeconds: Math.max(0, Number(row?.age ?? 0)) };
}
