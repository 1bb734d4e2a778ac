import type { Em } from '../../db/orm.js';

/**
 * Data access for `events`, the append-only outbox (SQL only: written on the settle path
 * with one insert that must land before the webhook fan-out's insert-select references it,
 * and listed by `seq`, a database identity that has no place on an object).
 */

export type EventRow = { id: string; seq: string | number; payload: unknown };
export type EventScope = { projectId: string; livemode: boolean };

export async function insertEvent(
  tx: Em,
  e: { id: string; projectId: string; merchantId: string | null; livemode: boolean; type: string; payload: string; createdAt: Date },
): Promise<void> {
  await tx.execute('insert into events (id, project_id, merchant_id, livemode, type, payload, created_at) values (?, ?, ?, ?, ?, ?, ?)', [
    e.id,
    e.projectId,
    e.merchantId,
    e.livemode,
    e.type,
    e.payload,
    e.createdAt,
  ]);
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
 * events about one object (`data.object.id`, e.g. an order id), over the `events_object` index.
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
    where.push(`payload #>> '{data,object,id}' = ?`);
    params.push(q.objectId);
  }
  if (q.beforeSeq !== undefined) {
    where.push('seq < ?');
    params.push(q.beforeSeq);
  }
  params.push(q.limit);
  return em.execute<EventRow[]>(`select id, seq, payload from events where ${where.join(' and ')} order by seq desc limit ?`, params);
}
