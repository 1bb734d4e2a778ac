import type {
  CreateWebhookEndpointBody,
  UpdateWebhookEndpointBody,
  WebhookEndpoint,
  WebhookEndpointWithSecret,
  WebhookEvent,
  WebhookEventType,
} from '@svc/contract';
import type { z } from 'zod';
import type { WebhookEventDetail } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { respondIn, type AuthContext, type AuthedCtx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix, newId } from '../../lib/ids.js';
import type { Services } from '../../http/context.js';
import { lockProjectForInserts } from '../accounts/index.js';
import { findEventRow, listEventRows, type EventFanOut, type EventRow } from '../events/index.js';
import type { WebhookEndpointRow } from './entity.js';
import { newWebhookSecret } from './signature.js';
import { checkWebhookUrl, outboundRules } from './url.js';
import type { CommitWake } from './wake.js';
import {
  cancelPendingDeliveries,
  countLiveEndpoints,
  enqueueDeliveries,
  enqueueTestDelivery,
  EVENT_FAN_OUT_CTES,
  findEndpointRow,
  freezeEventBody,
  insertEndpoint,
  listAttemptsOfEvent,
  listDeliveriesOfEvent,
  listEndpointRows,
  saveEndpoints,
} from './store.js';

/** Endpoints per project and mode (fan-out cost grows with each one). */
export const MAX_ENDPOINTS = 16;
/** How long the replaced secret keeps signing after a rotation. */
export const ROTATION_OVERLAP_MS = 24 * 3600 * 1000;

const iso = (d: Date | string | null | undefined) => (d ? new Date(d).toISOString() : null);

/** `now` is the injected clock (an overlapping previous secret shows its expiry until then). */
export function presentEndpoint(e: WebhookEndpointRow, now: Date): WebhookEndpoint {
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
  const url = checkWebhookUrl(body.url, outboundRules(ctx.services.config, livemode));
  const id = newId('whk');
  const secret = newWebhookSecret();
  return ctx.em.transactional(async (tx) => {
    // Creates of one project and mode take turns (the project row, FOR NO KEY UPDATE so
    // inserts referencing the project are not blocked), so the count below cannot be stale.
    await lockProjectForInserts(tx, projectId);
    const count = await countLiveEndpoints(tx, { projectId, livemode });
    const now = ctx.services.now();
    if (count >= MAX_ENDPOINTS) throw new ApiError('WEBHOOK_ENDPOINT_LIMIT');
    const e = await insertEndpoint(tx, {
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
      createdAt: now,
      updatedAt: now,
    });
    return respondIn(ctx, tx, 201, { ...presentEndpoint(e, now), secret });
  });
}

/**
 * An endpoint of the key's project and mode; another project's or mode's id, or a deleted one, is 404.
 * `lock` takes the row FOR UPDATE (in a transaction) for a read-modify-write.
 */
export async function findWebhookEndpoint(em: Em, auth: AuthContext, id: string, opts: { lock?: boolean } = {}): Promise<WebhookEndpointRow> {
  const e = hasPrefix(id, 'whk') ? await findEndpointRow(em, auth, id, opts) : null;
  if (!e) throw new ApiError('NOT_FOUND', 'No such webhook endpoint.');
  return e;
}

export async function getWebhookEndpoint(ctx: AuthedCtx, id: string): Promise<WebhookEndpoint> {
  return presentEndpoint(await findWebhookEndpoint(ctx.em, ctx.auth, id), ctx.services.now());
}

export async function listWebhookEndpoints(ctx: AuthedCtx, limit: number, cursor?: string) {
  const { em, auth } = ctx;
  const now = ctx.services.now();
  if (cursor && !hasPrefix(cursor, 'whk')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const rows = await listEndpointRows(em, auth, { limit: limit + 1, beforeId: cursor });
  const page = rows.slice(0, limit);
  const hasMore = rows.length > limit;
  return { data: page.map((r) => presentEndpoint(r, now)), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

export async function updateWebhookEndpoint(ctx: AuthedCtx, id: string, body: UpdateWebhookEndpointBody): Promise<WebhookEndpoint> {
  return ctx.em.transactional(async (tx) => {
    // The endpoint row first, then its deliveries and attempts: the workers' lock order (webhooks/store.ts).
    const e = await findWebhookEndpoint(tx, ctx.auth, id, { lock: true });
    if (body.url !== undefined) {
      const url = checkWebhookUrl(body.url, outboundRules(ctx.services.config, e.livemode));
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
    const now = ctx.services.now();
    e.updatedAt = now;
    await saveEndpoints(tx);
    return presentEndpoint(e, now);
  });
}

export async function deleteWebhookEndpoint(ctx: AuthedCtx, id: string): Promise<void> {
  await ctx.em.transactional(async (tx) => {
    // The endpoint row first, then its deliveries and attempts: the workers' lock order (webhooks/store.ts).
    const e = await findWebhookEndpoint(tx, ctx.auth, id, { lock: true });
    const now = ctx.services.now();
    e.deletedAt = now;
    e.updatedAt = now;
    await saveEndpoints(tx);
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
  return ctx.em.transactional(async (tx) => {
    const e = await findWebhookEndpoint(tx, ctx.auth, id, { lock: true });
    const now = ctx.services.now();
    e.previousSecretSealed = e.secretSealed;
    e.previousSecretExpiresAt = new Date(now.getTime() + ROTATION_OVERLAP_MS);
    e.secretSealed = ctx.services.box.seal(secret, e.id);
    e.updatedAt = now;
    await saveEndpoints(tx);
    return respondIn(ctx, tx, 200, { ...presentEndpoint(e, now), secret });
  });
}

// ---- events ------------------------------------------------------------------------------

function parsePayload(payload: unknown): WebhookEvent {
  return (typeof payload === 'string' ? JSON.parse(payload) : payload) as WebhookEvent;
}

export async function listEvents(em: Em, auth: AuthContext, q: { limit: number; cursor?: string; type?: WebhookEventType; order_id?: string }) {
  let beforeSeq: string | number | undefined;
  if (q.cursor) {
    const found = hasPrefix(q.cursor, 'evt') ? await findEventRow(em, auth, q.cursor) : undefined;
    if (!found) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
    beforeSeq = found.seq;
  }
  const rows = await listEventRows(em, auth, { limit: q.limit + 1, type: q.type, objectId: q.order_id, beforeSeq });
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map((r) => parsePayload(r.payload)), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

async function findEvent(em: Em, auth: AuthContext, id: string): Promise<EventRow> {
  const row = hasPrefix(id, 'evt') ? await findEventRow(em, auth, id) : undefined;
  if (!row) throw new ApiError('NOT_FOUND', 'No such event.');
  return row;
}

export async function getEvent(em: Em, auth: AuthContext, id: string): Promise<z.infer<typeof WebhookEventDetail>> {
  const ev = await findEvent(em, auth, id);
  const deliveries = await listDeliveriesOfEvent(em, ev.id);
  const attempts = await listAttemptsOfEvent(em, ev.id);
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
 * Enqueues the event's deliveries and wakes the local worker when there are any. An order
 * event goes to every matching endpoint; a `webhook_endpoint.test` event only to the endpoint
 * it tested (its `data.object.id`), never through `enabled_events` (so never through `*`).
 */
async function enqueueAndWake(tx: Em, wake: CommitWake, event: WebhookEvent, scope: { projectId: string; livemode: boolean }, replay: boolean): Promise<string[]> {
  const { projectId, livemode } = scope;
  const endpointIds =
    event.type === 'webhook_endpoint.test'
      ? await enqueueTestDelivery(tx, { id: event.id, endpointId: event.data.object.id, projectId, livemode }, replay)
      : await enqueueDeliveries(tx, { id: event.id, type: event.type, projectId, livemode }, replay);
  if (endpointIds.length > 0) wake.markEnqueued();
  return endpointIds;
}

export async function replayEvent(ctx: AuthedCtx, id: string) {
  return ctx.em.transactional(async (tx) => {
    const ev = await findEvent(tx, ctx.auth, id);
    const event = parsePayload(ev.payload);
    await freezeEventBody(tx, ev.id, ctx.services.events.bytesOfStoredEvent(event));
    const endpointIds = await enqueueAndWake(tx, ctx.services.wake, event, ctx.auth, true);
    return respondIn(ctx, tx, 200, { event_id: ev.id, deliveries: endpointIds.map((endpoint_id) => ({ endpoint_id, status: 'pending' as const })) });
  });
}

/**
 * POST /v1/webhooks/endpoints/<id>/test: records a `webhook_endpoint.test` event whose one
 * delivery (the outbox fan-out, so the normal queue, signing and retries) goes to this
 * endpoint. The endpoint row is locked, so a concurrent disable or delete cannot slip between
 * the check and the enqueue.
 */
export async function sendTestEvent(ctx: AuthedCtx, id: string) {
  return ctx.em.transactional(async (tx) => {
    const e = await findWebhookEndpoint(tx, ctx.auth, id, { lock: true });
    if (e.status === 'disabled') throw new ApiError('WEBHOOK_ENDPOINT_DISABLED');
    const event = await ctx.services.events.record(tx, {
      projectId: e.projectId,
      merchantId: null,
      livemode: e.livemode,
      type: 'webhook_endpoint.test',
      object: { id: e.id, object: 'webhook_endpoint', url: e.url },
    });
    const deliveries = await listDeliveriesOfEvent(tx, event.id);
    return respondIn(ctx, tx, 200, { event_id: event.id, deliveries: deliveries.map((d) => ({ endpoint_id: d.endpoint_id, status: 'pending' as const })) });
  });
}

// ---- fan-out -----------------------------------------------------------------------------

/** The outbox fan-out: runs in the statement that records the events, so deliveries commit with them. */
export function webhookFanOut(wake: CommitWake): EventFanOut {
  return {
    ctes: EVENT_FAN_OUT_CTES,
    onFanned: (targets) => {
      if (targets.length > 0) wake.markEnqueued();
    },
  };
}
