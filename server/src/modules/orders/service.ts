import { Readable, pipeline } from 'node:stream';
import { stringify } from 'csv-stringify';
import { ORDER_EXPORT_COLUMNS, type OrderExportQuery, type OrderListQuery, type OrdersSummary } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { AuthContext, Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { countHeldSessions } from '../checkout/index.js';
import { findMerchant } from '../merchants/index.js';
import { formatAtScale } from '../../lib/money.js';
import { lastDays } from '../../lib/time.js';
import { countFailingEndpoints } from '../webhooks/index.js';
import { presentOrder } from './present.js';
import type { OrderRow } from './entity.js';
import { listOrderRows, summarizeOrderDays, type OrderDayFigures, type OrderFilters, type OrderScope } from './store.js';

/**
 * The order feed of the key's project and mode, newest first (ids are time-sortable), narrowed
 * by every filter given. The cursor is the last order id of the previous page: the next page is
 * the same filtered feed below it, so the filters must be sent again with it.
 */
export async function listOrders(em: Em, auth: AuthContext, q: OrderListQuery) {
  if (q.cursor !== undefined && !hasPrefix(q.cursor, 'ord')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const { scope, filters } = await feedQuery(em, auth, q);
  const rows = await listOrderRows(em, scope, { ...filters, beforeId: q.cursor }, q.limit + 1);
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map(presentOrder), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
}

/** The feed's scope (the key's project and mode, one of its merchants if named) and filters, shared by the list and the export. */
async function feedQuery(em: Em, auth: AuthContext, q: OrderExportQuery): Promise<{ scope: OrderScope; filters: OrderFilters }> {
  const merchantId = q.merchant_id !== undefined ? (await findMerchant(em, auth, q.merchant_id)).id : undefined;
  return {
    scope: { projectId: auth.projectId, livemode: auth.livemode, merchantId },
    filters: {
      decision: q.decision,
      agentId: q.agent_id,
      trustTier: q.trust_tier,
      search: q.q,
      createdGte: q.created_gte !== undefined ? new Date(q.created_gte) : undefined,
      createdLt: q.created_lt !== undefined ? new Date(q.created_lt) : undefined,
    },
  };
}

/** Orders read per query while an export streams (keyset pages, newest first). */
export const EXPORT_BATCH = 500;

/** A CSV cell a spreadsheet would read as a formula (OWASP "CSV injection") gets a leading apostrophe. */
export const csvSafe = (cell: string): string => (/^[=+\-@\t\r]/.test(cell) ? `'${cell}` : cell);

/** One CSV record of an order: the feed's projection flattened to ORDER_EXPORT_COLUMNS. */
function exportRecord(o: OrderRow): Record<(typeof ORDER_EXPORT_COLUMNS)[number], string> {
  const v = presentOrder(o);
  return {
    id: v.id,
    created_at: v.created_at,
    merchant_id: v.merchant_id,
    session_id: v.session_id,
    agent_id: v.agent_id,
    decision: v.decision,
    trust_tier: v.trust_tier,
    source: v.source,
    currency: v.total?.currency ?? '',
    subtotal: v.total?.subtotal ?? '',
    tax: v.total?.tax ?? '',
    total: v.total?.total ?? '',
    amount_refunded: v.amount_refunded,
    refund_status: v.refund_status,
    rail_name: v.rail_name,
    settlement_ref: v.settlement_ref ?? '',
    receipt_id: v.receipt_id ?? '',
    mandate_type: v.mandate_type,
  };
}

/**
 * GET /v1/orders/export.csv: every order of the feed's filters as CSV (csv-stringify: RFC 4180
 * quoting), streamed. The merchant and the first batch are read before the stream starts, so a
 * refusal is still an error response; then one keyset query per EXPORT_BATCH orders, each
 * written before the next is read (the stream's backpressure paces the reads).
 */
export async function exportOrdersCsv(em: Em, auth: AuthContext, q: OrderExportQuery, batchSize = EXPORT_BATCH): Promise<Readable> {
  const { scope, filters } = await feedQuery(em, auth, q);
  const first = await listOrderRows(em, scope, filters, batchSize);
  async function* records() {
    let batch = first;
    while (batch.length > 0) {
      for (const o of batch) yield exportRecord(o);
      if (batch.length < batchSize) return;
      batch = await listOrderRows(em, scope, { ...filters, beforeId: batch.at(-1)!.id }, batchSize);
    }
  }
  const csv = stringify({ header: true, columns: [...ORDER_EXPORT_COLUMNS], cast: { string: csvSafe } });
  // an error mid-stream destroys the response (a truncated download, never a partial file that looks whole)
  pipeline(Readable.from(records()), csv, () => undefined);
  return csv;
}

/** Calendar days the summary covers, and how many of them (ending today) make its week. */
export const SUMMARY_DAYS = 14;
export const SUMMARY_WEEK_DAYS = 7;

/**
 * GET /v1/orders/summary: today, the last 7 and 14 calendar days in `tz` (default UTC) on the
 * injected clock, the held sessions awaiting review and the failing webhook endpoints, all in
 * the key's project and mode. Volumes are the database's exact numeric sums, shown with at
 * least two decimals (never rounded).
 */
export async function ordersSummary(ctx: Ctx & { auth: AuthContext }, q: { merchant_id?: string; tz?: string }): Promise<OrdersSummary> {
  const { em, auth } = ctx;
  const merchantId = q.merchant_id !== undefined ? (await findMerchant(em, auth, q.merchant_id)).id : undefined;
  const scope = { projectId: auth.projectId, livemode: auth.livemode, merchantId };
  const days = lastDays(ctx.services.now(), q.tz ?? 'UTC', SUMMARY_DAYS);
  const figures = await summarizeOrderDays(em, scope, days, SUMMARY_WEEK_DAYS);
  const volume = (v: string) => formatAtScale(v, 2);
  const period = (f: OrderDayFigures) => ({
    accepted_volume: volume(f.acceptedVolume),
    accepted_count: f.acceptedCount,
    orders_by_decision: { accept: f.acceptedCount, reject: f.rejectCount, hold: f.holdCount },
  });
  return {
    currency: 'USDC',
    today: period(figures.days.at(-1)!),
    week: period(figures.week),
    days: figures.days.map((d) => ({ date: d.date, accepted_volume: volume(d.acceptedVolume), accepted_count: d.acceptedCount })),
    holds_waiting: await countHeldSessions(em, scope),
    failing_endpoints: await countFailingEndpoints(em, auth),
  };
}
