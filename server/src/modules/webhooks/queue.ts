import type { Em } from '../../db/orm.js';
import type { SecretBox } from '../../lib/crypto.js';
import { newId } from '../../lib/ids.js';
import type { AttemptOutcome } from './deliver.js';

/**
 * The delivery queue in PostgreSQL (identical on PGlite): a due row is claimed with
 * FOR UPDATE SKIP LOCKED and leased (`locked_until`, `lock_owner`), so any number of
 * workers send each attempt once, and a worker that dies leaves a lease that expires.
 * Every statement here runs in a short transaction; no transaction spans an HTTP call.
 */

/** Section 6: delay of each attempt from enqueue (attempt 1 is immediate). */
export const RETRY_SCHEDULE_MS = [0, 30_000, 120_000, 600_000, 3_600_000, 21_600_000, 86_400_000] as const;
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

type DueRow = { id: string | number; event_id: string; endpoint_id: string; attempt_count: number; leased: boolean };
type EndpointRow = {
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

/** Claims up to `limit` due deliveries for `owner`, opening one attempt row each. */
export async function claimDue(em: Em, box: SecretBox, owner: string, limit: number, leaseMs: number): Promise<ClaimedDelivery[]> {
  return em.transactional(async (tx) => {
    const due = await tx.execute<DueRow[]>(
      `select d.id, d.event_id, d.endpoint_id, d.attempt_count, (d.locked_until is not null) as leased
       from webhook_deliveries d
       where d.status = 'pending' and d.next_attempt_at <= now() and (d.locked_until is null or d.locked_until <= now())
       order by d.next_attempt_at, d.id
       limit ?
       for update skip locked`,
      [limit],
    );
    if (due.length === 0) return [];
    const ids = due.map((d) => String(d.id));
    const leasedIds = due.filter((d) => d.leased).map((d) => String(d.id));
    if (leasedIds.length > 0) {
      await tx.execute(`update webhook_attempts set status = 'lost', error = ?, completed_at = now() where delivery_id in (?) and status = 'in_progress'`, [
        LOST_ERROR,
        leasedIds,
      ]);
    }
    const endpointIds = [...new Set(due.map((d) => d.endpoint_id))];
    const endpoints = await tx.execute<EndpointRow[]>(
      `select id, url, livemode, status, deleted_at, secret_sealed, previous_secret_sealed, previous_secret_expires_at
       from webhook_endpoints where id in (?)`,
      [endpointIds],
    );
    const byId = new Map(endpoints.map((e) => [e.id, e]));
    const eventIds = [...new Set(due.map((d) => d.event_id))];
    const bodies = await tx.execute<Array<{ id: string; body: string }>>(
      `select e.id, coalesce(b.body, e.payload::text) as body from events e left join webhook_event_bodies b on b.event_id = e.id where e.id in (?)`,
      [eventIds],
    );
    const bodyOf = new Map(bodies.map((b) => [b.id, b.body]));

    const now = new Date();
    const secretsOf = new Map<string, string[]>();
    const live: DueRow[] = [];
    const canceled: string[] = [];
    for (const d of due) {
      const e = byId.get(d.endpoint_id);
      if (!e || e.deleted_at || e.status === 'disabled') {
        canceled.push(String(d.id));
        continue;
      }
      if (!secretsOf.has(e.id)) {
        const secrets = [box.open(e.secret_sealed, e.id)];
        if (e.previous_secret_sealed && e.previous_secret_expires_at && new Date(e.previous_secret_expires_at) > now) {
          secrets.push(box.open(e.previous_secret_sealed, e.id));
        }
        secretsOf.set(e.id, secrets);
      }
      live.push(d);
    }
    if (canceled.length > 0) {
      await tx.execute(
        `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null where id in (?)`,
        [canceled],
      );
    }
    if (live.length === 0) return [];
    await tx.execute(`update webhook_deliveries set locked_until = now() + ? * interval '1 millisecond', lock_owner = ? where id in (?)`, [
      leaseMs,
      owner,
      live.map((d) => String(d.id)),
    ]);
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
    const values = claimed.map(() => `(?, ?, ?, ?, ?, 'in_progress')`).join(', ');
    await tx.execute(
      `insert into webhook_attempts (id, delivery_id, event_id, endpoint_id, attempt_number, status) values ${values}`,
      claimed.flatMap((c) => [c.attemptId, c.deliveryId, c.eventId, c.endpointId, c.attemptNumber]),
    );
    return claimed;
  });
}

/**
 * Records one attempt's outcome and moves the delivery on: succeeded, rescheduled per the
 * section 6 table (times `retryScale`) from enqueue, or permanently failed after the
 * seventh attempt. Updates the endpoint's health (pending -> enabled on a 2xx; disabled
 * after five days of only failures). The delivery update is fenced by `lock_owner`, so a
 * worker whose lease was taken over cannot overwrite the new owner's state.
 */
export async function recordAttempt(em: Em, owner: string, c: ClaimedDelivery, outcome: AttemptOutcome, retryScale: number): Promise<void> {
  await em.transactional(async (tx) => {
    await tx.execute(
      `update webhook_attempts set status = ?, response_status = ?, duration_ms = ?, error = ?, completed_at = now() where id = ?`,
      [outcome.ok ? 'succeeded' : 'failed', outcome.responseStatus, outcome.durationMs, outcome.error?.slice(0, 1000) ?? null, c.attemptId],
    );
    if (outcome.ok) {
      await tx.execute(
        `update webhook_deliveries set status = 'succeeded', attempt_count = ?, completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
         where id = ? and lock_owner = ?`,
        [c.attemptNumber, c.deliveryId, owner],
      );
      // Skip the write when nothing would change, so busy endpoints do not serialize workers on one row.
      await tx.execute(
        `update webhook_endpoints
         set status = case when status = 'pending' then 'enabled' else status end,
             failing_since = null, last_success_at = now()
         where id = ? and (status = 'pending' or failing_since is not null or last_success_at is null or last_success_at < now() - interval '1 minute')`,
        [c.endpointId],
      );
      return;
    }
    if (c.attemptNumber >= MAX_ATTEMPTS) {
      await tx.execute(
        `update webhook_deliveries set status = 'failed', attempt_count = ?, completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
         where id = ? and lock_owner = ?`,
        [c.attemptNumber, c.deliveryId, owner],
      );
    } else {
      const delayMs = RETRY_SCHEDULE_MS[c.attemptNumber]! * retryScale;
      await tx.execute(
        `update webhook_deliveries set attempt_count = ?, next_attempt_at = enqueued_at + ? * interval '1 millisecond', locked_until = null, lock_owner = null
         where id = ? and lock_owner = ?`,
        [c.attemptNumber, delayMs, c.deliveryId, owner],
      );
    }
    const [endpoint] = await tx.execute<Array<{ status: string }>>(
      `update webhook_endpoints
       set failing_since = coalesce(failing_since, now()),
           status = case when failing_since <= now() - interval '${AUTO_DISABLE_AFTER}' then 'disabled' else status end,
           disabled_reason = case when failing_since <= now() - interval '${AUTO_DISABLE_AFTER}' and status <> 'disabled' then 'failing' else disabled_reason end
       where id = ?
       returning status`,
      [c.endpointId],
    );
    if (endpoint?.status === 'disabled') {
      await tx.execute(
        `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
         where endpoint_id = ? and status = 'pending' and lock_owner is null`,
        [c.endpointId],
      );
    }
  });
}

/** Keeps the leases of everything this worker still holds. */
export async function extendLeases(em: Em, owner: string, leaseMs: number): Promise<void> {
  await em.execute(`update webhook_deliveries set locked_until = now() + ? * interval '1 millisecond' where lock_owner = ? and status = 'pending'`, [
    leaseMs,
    owner,
  ]);
}

/** Hands back claimed deliveries that were never sent (graceful stop): due again at once. */
export async function releaseClaims(em: Em, owner: string, claims: ClaimedDelivery[]): Promise<void> {
  if (claims.length === 0) return;
  await em.transactional(async (tx) => {
    await tx.execute(`delete from webhook_attempts where id in (?) and status = 'in_progress'`, [claims.map((c) => c.attemptId)]);
    await tx.execute(`update webhook_deliveries set locked_until = null, lock_owner = null where id in (?) and lock_owner = ?`, [
      claims.map((c) => c.deliveryId),
      owner,
    ]);
  });
}
