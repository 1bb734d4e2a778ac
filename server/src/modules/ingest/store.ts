import type { Em } from '../../db/orm.js';
import { HOSTED_SESSION_ID_SQL } from '../checkout/index.js';
import { FOREIGN_ORDER_OF_SESSION_SQL } from '../orders/index.js';

/**
 * Data access for `ingest_log` and `ingested_sessions` (SQL only: a report claims its slot
 * with one insert-or-nothing on the primary key, a session report is one atomic upsert, and
 * the cross-project guard is one statement over four tables, whose `checkout_sessions` and
 * `orders` parts come from their owners' stores). Orders are written through modules/orders.
 */

export type IngestScope = { projectId: string; livemode: boolean };
export type IngestKind = 'order' | 'decision';
export type IngestLogRow = { order_id: string | null; receipt_id: string | null; agent_id: string; decision: string };

/** Claims the (project, mode, kind, session) slot; false when this report was already ingested. */
export async function claimIngestReport(
  tx: Em,
  scope: IngestScope,
  r: { kind: IngestKind; sessionId: string; agentId: string; merchantId: string | null; decision: string; now: Date },
): Promise<boolean> {
  const rows = await tx.execute(
    `insert into ingest_log (project_id, livemode, kind, session_id, agent_id, merchant_id, decision, created_at) values (?, ?, ?, ?, ?, ?, ?, ?)
     on conflict do nothing returning session_id`,
    [scope.projectId, scope.livemode, r.kind, r.sessionId, r.agentId, r.merchantId, r.decision, r.now],
  );
  return rows.length > 0;
}

export async function findIngestReport(tx: Em, scope: IngestScope, kind: IngestKind, sessionId: string): Promise<IngestLogRow> {
  const rows = await tx.execute<IngestLogRow[]>(
    'select order_id, receipt_id, agent_id, decision from ingest_log where project_id = ? and livemode = ? and kind = ? and session_id = ?',
    [scope.projectId, scope.livemode, kind, sessionId],
  );
  return rows[0]!;
}

export async function setIngestReportOrder(tx: Em, scope: IngestScope, kind: IngestKind, sessionId: string, ids: { orderId: string; receiptId?: string }): Promise<void> {
  if (ids.receiptId !== undefined) {
    await tx.execute('update ingest_log set order_id = ?, receipt_id = ? where project_id = ? and livemode = ? and kind = ? and session_id = ?', [
      ids.orderId,
      ids.receiptId,
      scope.projectId,
      scope.livemode,
      kind,
      sessionId,
    ]);
  } else {
    await tx.execute('update ingest_log set order_id = ? where project_id = ? and livemode = ? and kind = ? and session_id = ?', [
      ids.orderId,
      scope.projectId,
      scope.livemode,
      kind,
      sessionId,
    ]);
  }
}

/**
 * True when the session id is a hosted checkout session, or its order or reports belong to
 * another project, mode or merchant (`merchantId`, when anchored).
 */
export async function sessionIdTakenElsewhere(em: Em, scope: IngestScope, sessionId: string, merchantId: string | null): Promise<boolean> {
  const rows = await em.execute(
    `${HOSTED_SESSION_ID_SQL}
     union all ${FOREIGN_ORDER_OF_SESSION_SQL}
     union all select 1 from ingest_log where session_id = ? and not (project_id = ? and livemode = ?)
     union all select 1 from ingested_sessions where session_id = ? and not (project_id = ? and livemode = ?)
     limit 1`,
    [sessionId, sessionId, scope.projectId, scope.livemode, merchantId, merchantId, sessionId, scope.projectId, scope.livemode, sessionId, scope.projectId, scope.livemode],
  );
  return rows.length > 0;
}

export async function upsertIngestedSession(em: Em, scope: IngestScope, s: { sessionId: string; merchantId: string | null; payload: string; now: Date }): Promise<void> {
  await em.execute(
    `insert into ingested_sessions (project_id, livemode, session_id, merchant_id, payload, created_at, updated_at) values (?, ?, ?, ?, ?, ?, ?)
     on conflict (project_id, livemode, session_id) do update set merchant_id = excluded.merchant_id, payload = excluded.payload, updated_at = excluded.updated_at`,
    [scope.projectId, scope.livemode, s.sessionId, s.merchantId, s.payload, s.now, s.now],
  );
}
