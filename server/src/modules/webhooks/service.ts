import type {
  CreateWebhookEndpointBody,
  UpdateWebhookEndpointBody,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEvent,
  WebhookEventType,
} from '@svc/contract';
import type { z } from 'zod';
import { LockMode } from '@mikro-orm/core';
import type { WebhookEventDetail } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { AuthContext, Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import type { Services } from '../../services.js';
import { onEventRecorded, type EventEnvelope, type RecordEventInput } from '../events/service.js';
import { WebhookEndpointEntity, type WebhookEndpointRow } from './entity.js';
import { newWebhookSecret } from './signature.js';
import { checkWebhookUrl } from './url.js';
import { markEnqueued, watchCommits } from './wake.js';

type AuthedCtx = Ctx & { auth: AuthContext };

/** Endpoints per project and mode (fan-out cost grows with each one). */
export const MAX_ENDPOINTS = 16;
/** How long the replaced secret keeps signing after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

export function presentEndpoint(e: WebhookEndpointRow, now = new Date()): WebhookEndpoint {
  const prevActive = e.previousSecretSealed && e.previousSecretExpiresAt && e.previousSecretExpiresAt > now;
  return {
    id: e.id,
    url: e.url,
    enabled_events: e.enabledEvents,
    status: e.status,
    disabled_reason: e.status === 'disabled' ? (e.disabledReason ?? 'manual') : null,
    description: e.description ?? null,
    livemode: e.livemode,
    previous_secret_expires_at: prevActive ? e.previousSecretExpiresAt!.toISOString() : null,
    created_at: e.createdAt.toISOString(),
    updated_at: e.updatedAt.toISOString(),
  };
}

export async function createWebhookEndpoint(ctx: AuthedCtx, body: CreateWebhookEndpointBody): Promise<WebhookEndpointWithSecret> {
  const { projectId, livemode } = ctx.auth;
  const url = checkWebhookUrl(body.url, livemode);
  const id = newId('whk');
  const secret = newWebhookSecret();
  const row = await ctx.em.transactional(async (tx) => {
    // Creates of one project and mode take turns (the project row, FOR NO KEY UPDATE so
    // inserts referencing the project are not blocked), so the count below cannot be stale.
    await tx.execute('select id from projects where id = ? for no key update', [projectId]);
    const count = await tx.count(WebhookEndpointEntity, { projectId, livemode, deletedAt: null });
    if (count >= MAX_ENDPOINTS) throw new ApiError('WEBHOOK_ENDPOINT_LIMIT');
    const e = tx.create(WebhookEndpointEntity, {
      id,
      projectId,
      livemode,
      url,
      enabledEvents: body.enabled_events,
      description: body.description || null,
      status: 'pending',
      disabledReason: null,
      secretSealed: ctx.services.box.seal(secret, id),
      previousSecretSealed: null,
      previousSecretExpiresAt: null,
      failingSince: null,
      lastSuccessAt: null,
      deletedAt: null,
    });
    await tx.flush();
    return e;
  });
  return { ...presentEndpoint(row), secret };
}

/**
 * An endpoint of the key's project and mode; another project's or mode's id, or a deleted one, is 404.
 * `lock` takes the row FOR UPDATE (in a transaction) for a read-modify-write.
 */
export async function findWebhookEndpoint(em: Em, auth: AuthContext, id: string, opts: { lock?: boolean } = {}): Promise<WebhookEndpointRow> {
  const e = hasPrefix(id, 'whk')
    ? await em.findOne(
        WebhookEndpointEntity,
        { id, projectId: auth.projectId, livemode: auth.livemode, deletedAt: null },
        opts.lock ? { lockMode: LockMode.PESSIMISTIC_WRITE } : {},
      )
    : null;
  if (!e) throw new ApiError('NOT_FOUND', 'No such webhook endpoint.');
  return e;
}

export async function listWebhookEndpoints(em: Em, auth: AuthContext, limit: number, cursor?: string) {
  const where: Record<string, unknown> = { projectId: auth.projectId, livemode: auth.livemode, deletedAt: null };
  if (cursor) {
    if (!hasPrefix(cursor, 'whk')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
    where.id = { $lt: cursor };
  }
  const rows = await em.find(WebhookEndpointEntity, where, { orderBy: { id: 'desc' }, limit: limit + 1 });
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  const now = new Date();
  return { data: page.map((r) => presentEndpoint(r, now)), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

async function cancelPendingDeliveries(tx: Em, endpointId: string, why: string) {
  await tx.execute(
    `update webhook_deliveries set status = 'canceled', completed_at = now(), next_attempt_at = null, locked_until = null, lock_owner = null
     where endpoint_id = ? and status = 'pending'`,
    [endpointId],
  );
  await tx.execute(
    `update webhook_attempts set status = 'lost', error = ?, completed_at = now() where endpoint_id = ? and status = 'in_progress'`,
    [why, endpointId],
  );
}

export async function updateWebhookEndpoint(ctx: AuthedCtx, id: string, body: UpdateWebhookEndpointBody): Promise<WebhookEndpoint> {
  return ctx.em.transactional(async (tx) => {
    const e = await findWebhookEndpoint(tx, ctx.auth, id);
    if (body.url !== undefined) {
      const url = checkWebhookUrl(body.url, e.livemode);
      if (url !== e.url) {
        e.url = url;
        // A new receiver has not proven itself yet.
        e.lastSuccessAt = null;
        e.failingSince = null;
        if (e.status !== 'disabled') e.status = 'pending';
      }
    }
    if (body.enabled_events !== undefined) e.enabledEvents = body.enabled_events;
    if (body.description !== undefined) e.description = body.description || null;
    if (body.disabled === true && e.status !== 'disabled') {
      e.status = 'disabled';
      e.disabledReason = 'manual';
      await cancelPendingDeliveries(tx, e.id, 'the endpoint was disabled before the attempt completed');
    } else if (body.disabled === false && e.status === 'disabled') {
      e.status = e.lastSuccessAt ? 'enabled' : 'pending';
      e.disabledReason = null;
      e.failingSince = null;
    }
    e.updatedAt = new Date();
    await tx.flush();
    return presentEndpoint(e);
  });
}

export async function deleteWebhookEndpoint(ctx: AuthedCtx, id: string): Promise<void> {
  await ctx.em.transactional(async (tx) => {
    const e = await findWebhookEndpoint(tx, ctx.auth, id);
    e.deletedAt = new Date();
    e.updatedAt = new Date();
    await tx.flush();
    await cancelPendingDeliveries(tx, e.id, 'the endpoint was deleted before the attempt completed');
  });
}

/**
 * New secret shown once; the replaced one keeps signing (a second v1) for 24 h. The row is
 * locked, so concurrent rotations run one after the other: each answered secret is the
 * current or the previous one, never silently dropped.
 */
export async function rotateWebhookSecret(ctx: AuthedCtx, id: string): Promise<WebhookEndpointWithSecret> {
  const secret = newWebhookSecret();
  const row = await ctx.em.transactional(async (tx) => {
    const e = await findWebhookEndpoint(tx, ctx.auth, id, { lock: true });
    e.previousSecretSealed = e.secretSealed;
    e.previousSecretExpiresAt = new Date(Date.now() + ROTATION_OVERLAP_MS);
    e.secretSealed = ctx.services.box.seal(secret, e.id);
    e.updatedAt = new Date();
    await tx.flush();
    return e;
  });
  return { ...presentEndpoint(row), secret };
}

// ---- events ------------------------------------------------------------------------------

type EventRow = { id: string; seq: string | number; payload: unknown };

function parsePayload(payload: unknown): WebhookEvent {
  return (typeof payload === 'string' ? JSON.parse(payload) : payload) as WebhookEvent;
}

export async function listEvents(em: Em, auth: AuthContext, q: { limit: number; cursor?: string; type?: WebhookEventType }) {
  const where = ['project_id = ?', 'livemode = ?'];
  const params: unknown[] = [auth.projectId, auth.livemode];
  if (q.type) {
    where.push('type = ?');
    params.push(q.type);
  }
  if (q.cursor) {
    const found = hasPrefix(q.cursor, 'evt')
      ? await em.execute<Array<{ seq: string | number }>>('select seq from events where id = ? and project_id = ? and livemode = ?', [
          q.cursor,
          auth.projectId,
          auth.livemode,
        ])
      : [];
    if (!found[0]) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
    where.push('seq < ?');
    params.push(found[0].seq);
  }
  params.push(q.limit + 1);
  const rows = await em.execute<EventRow[]>(`select id, seq, payload from events where ${where.join(' and ')} order by seq desc limit ?`, params);
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map((r) => parsePayload(r.payload)), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

type DeliveryRow = {
  id: string | number;
  endpoint_id: string;
  status: 'pending' | 'succeeded' | 'failed' | 'canceled';
  replay: boolean;
  attempt_count: number;
  next_attempt_at: string | Date | null;
  enqueued_at: string | Date;
};
type AttemptRow = {
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

async function findEventRow(em: Em, auth: AuthContext, id: string): Promise<EventRow> {
  const rows = hasPrefix(id, 'evt')
    ? await em.execute<EventRow[]>('select id, seq, payload from events where id = ? and project_id = ? and livemode = ?', [
        id,
        auth.projectId,
        auth.livemode,
      ])
    : [];
  if (!rows[0]) throw new ApiError('NOT_FOUND', 'No such event.');
  return rows[0];
}

export async function getEvent(em: Em, auth: AuthContext, id: string): Promise<z.infer<typeof WebhookEventDetail>> {
  const ev = await findEventRow(em, auth, id);
  const deliveries = await em.execute<DeliveryRow[]>(
    'select id, endpoint_id, status, replay, attempt_count, next_attempt_at, enqueued_at from webhook_deliveries where event_id = ? order by id',
    [ev.id],
  );
  const attempts = await em.execute<AttemptRow[]>(
    `select id, delivery_id, attempt_number, status, response_status, duration_ms, error, created_at, completed_at
     from webhook_attempts where event_id = ? order by created_at, id`,
    [ev.id],
  );
  return {
    ...parsePayload(ev.payload),
    deliveries: deliveries.map((d) => ({
      endpoint_id: d.endpoint_id,
      status: d.status,
      replay: d.replay,
      attempt_count: d.attempt_count,
      next_attempt_at: d.status === 'pending' ? iso(d.next_attempt_at) : null,
      created_at: iso(d.enqueued_at)!,
      attempts: attempts
        .filter((a) => String(a.delivery_id) === String(d.id))
        .map((a) => ({
          id: a.id,
          attempt_number: a.attempt_number,
          status: a.status,
          response_status: a.response_status,
          duration_ms: a.duration_ms,
          error: a.error,
          created_at: iso(a.created_at)!,
          completed_at: iso(a.completed_at),
        })),
    })),
  };
}

/**
 * One pending delivery per matching endpoint: same project and mode, not deleted, not
 * disabled, and `enabled_events` holding the type or "*". Returns the endpoint ids.
 */
async function enqueueDeliveries(tx: Em, ev: { id: string; type: string; projectId: string; livemode: boolean }, replay: boolean) {
  const rows = await tx.execute<Array<{ endpoint_id: string }>>(
    `insert into webhook_deliveries (event_id, endpoint_id, replay, status, enqueued_at, next_attempt_at)
     select ?, e.id, ?, 'pending', now(), now() from webhook_endpoints e
     where e.project_id = ? and e.livemode = ? and e.deleted_at is null and e.status <> 'disabled'
       and (e.enabled_events @> '["*"]'::jsonb or e.enabled_events @> ?::jsonb)
     order by e.id
     returning endpoint_id`,
    [ev.id, replay, ev.projectId, ev.livemode, JSON.stringify([ev.type])],
  );
  if (rows.length > 0) markEnqueued();
  return rows.map((r) => r.endpoint_id);
}

export async function replayEvent(ctx: AuthedCtx, id: string) {
  return ctx.em.transactional(async (tx) => {
    const ev = await findEventRow(tx, ctx.auth, id);
    const payload = parsePayload(ev.payload);
    // Events recorded before webhooks existed have no stored bytes yet: freeze them now.
    await tx.execute(
      'insert into webhook_event_bodies (event_id, body) select id, payload::text from events where id = ? on conflict (event_id) do nothing',
      [ev.id],
    );
    const endpointIds = await enqueueDeliveries(tx, { id: ev.id, type: payload.type, projectId: ctx.auth.projectId, livemode: ctx.auth.livemode }, true);
    return { event_id: ev.id, deliveries: endpointIds.map((endpoint_id) => ({ endpoint_id, status: 'pending' as const })) };
  });
}

// ---- fan-out -----------------------------------------------------------------------------

/** The outbox hook: runs in the business transaction, so deliveries commit with the event. */
export async function fanOutEvent(tx: Em, envelope: EventEnvelope, input: RecordEventInput): Promise<void> {
  await tx.execute('insert into webhook_event_bodies (event_id, body) values (?, ?)', [envelope.id, JSON.stringify(envelope)]);
  await enqueueDeliveries(tx, { id: envelope.id, type: envelope.type, projectId: input.projectId, livemode: input.livemode }, false);
}

let fanOutInstalled = false;

/** Registers the fan-out on the outbox (once per process) and the commit wake-up on this ORM. */
export function installWebhooks(services: Pick<Services, 'orm'>): void {
  if (!fanOutInstalled) {
    onEventRecorded(fanOutEvent);
    fanOutInstalled = true;
  }
  watchCommits(services.orm);
}
