import type { Em } from '../../db/orm.js';
import { runSql, sqlParams, type SqlParams } from '../../db/sql.js';

/**
 * Data access for `events`, the append-only outbox (SQL only: written on the settle path
 * with one insert that must land before the webhook fan-out's insert-select references it,
 * and listed by `seq`, a database identity that has no place on an object).
 */

export type EventRow = { id: string; seq: string | number; payload: unknown };
export type EventScope = { projectId: string; livemode: boolean };

export type NewEventRow = {
  id: string;
  projectId: string;
  merchantId: string | null;
  livemode: boolean;
  type: string;
  /** The envelope's JSON: stored as the jsonb payload, and handed to the fan-out as the exact bytes. */
  body: string;
  createdAt: Date;
  /** Deliver only to this endpoint (a `webhook_endpoint.test` event), whatever its enabled_events. */
  onlyEndpoint: string | null;
};

/**
 * The CTEs that insert events with their fan-out, for a statement of the caller's: `ev(ord, id,
 * project_id, merchant_id, livemode, type, body, created_at, only_endpoint)`, the events being
 * written, then their insert and `fanOutCtes` (from the webhooks store), CTEs over `ev` that end
 * in `fanned(event_id, endpoint_id)`. A fan-out's rows reference these events; foreign keys are
 * checked at the end of the statement, so one statement holds both. `guard`, an SQL condition,
 * keeps every row out unless it holds (a statement that writes the events only beside its other
 * writes). Values are bound through `b`.
 */
export function eventCtes({ $ }: SqlParams, rows: NewEventRow[], fanOutCtes: string | null, guard = 'true'): string {
  const values = rows
    .map(
      (r, i) =>
        `(${i}, ${$(r.id)}::text, ${$(r.projectId)}::text, ${$(r.merchantId)}::text, ${$(r.livemode)}::boolean, ${$(r.type)}::text, ${$(r.body)}::text, ${$(r.createdAt)}::timestamptz, ${$(r.onlyEndpoint)}::text)`,
    )
    .join(', ');
  return `ev (ord, id, project_id, merchant_id, livemode, type, body, created_at, only_endpoint) as (select * from (values ${values}) as v where ${guard}),
     ev_inserted as (
       insert into events (id, project_id, merchant_id, livemode, type, payload, created_at)
       select id, project_id, merchant_id, livemode, type, body::jsonb, created_at from ev order by ord)${fanOutCtes ? `,\n     ${fanOutCtes}` : ''}`;
}

/** Inserts events in one statement, with their fan-out (`eventCtes`). Returns the fanned-out (event id, endpoint id) pairs. */
export async function insertEvents(tx: Em, rows: NewEventRow[], fanOutCtes: string | null): Promise<Array<{ event_id: string; endpoint_id: string }>> {
  const b = sqlParams();
  const ctes = eventCtes(b, rows, fanOutCtes);
  return runSql<{ event_id: string; endpoint_id: string }>(
    tx,
    `with ${ctes}
     ${fanOutCtes ? 'select event_id, endpoint_id from fanned' : 'select null::text as event_id, null::text as endpoint_id where false'}`,
    b.params,
  );
}

export async function findEventRow(em: Em, scope: EventScope, id: string): Promise<EventRow | undefined> {
  const rows = await em.execute<EventRow[]>('select id, seq, payload from events where id = ? and project_id = ? and livemode = ?', [
    id,
    scope.projectId,
    scope.livemode,
  ]);
  return rows[0];
}

/**
 * Newest first; `beforeSeq` continues a page (the seq of the cursor event). `objectId` keeps the
 * events about one object: `data.object.id` (an order's own events) or `data.object.order_id`
 * (its refunds' events), within the project and mode's part of the `events_object` index.
 */
export async function listEventRows(
  em: Em,
  scope: EventScope,
  q: { limit: number; type?: string | undefined; objectId?: string | undefined; beforeSeq?: string | number | undefined },
): Promise<EventRow[]> {
  const where = ['project_id = ?', 'livemode = ?'];
  const params: unknown[] = [scope.projectId, scope.livemode];
  if (q.type) {
    where.push('type = ?');
    params.push(q.type);
  }
  if (q.objectId) {
    // the object itself (an order's events) or an object of it (a refund's events name its order_id)
    where.push(`(payload #>> '{data,object,id}' = ? or payload #>> '{data,object,order_id}' = ?)`);
    params.push(q.objectId, q.objectId);
  }
  if (q.beforeSeq !== undefined) {
    where.push('seq < ?');
    params.push(q.beforeSeq);
  }
  params.push(q.limit);
  return em.execute<EventRow[]>(`select id, seq, payload from events where ${where.join(' and ')} order by seq desc limit ?`, params);
}
