import type { Decision, TrustTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { SqlParams } from '../../db/sql.js';
import type { DayWindow } from '../../lib/time.js';
import { OrderEntity, ReceiptEntity, type OrderRow, type ReceiptRow } from './entity.js';

/**
 * Data access for `orders` (an entity, ./entity.ts, written by settlement and ingest). The feed
 * is an entity query; the summary is SQL: money is summed by the database as `numeric` (a
 * JavaScript number would round), in one statement over the days it covers.
 */

/**
 * The order's and the receipt's parts of settlement's accepted-settle statement
 * (settlement/store.ts writeAcceptedAttempt), built here with the caller's parameters: each
 * inserts its row only when the CTE it selects from returned one (`from`.id: the session, the order).
 */
export function insertOrderSql({ $, json }: SqlParams, o: OrderRow, from: string): string {
  return `insert into orders (id, session_id, project_id, merchant_id, livemode, agent_id, decision, total, items, rail_name, settlement_ref,
         receipt_id, mandate_type, mandate_ref, trust_tier, buyer, source, settlement_attempt_id, settlement_status, created_at)
       select ${$(o.id)}::text, ${from}.id, ${$(o.projectId)}::text, ${$(o.merchantId)}::text, ${$(o.livemode)}::boolean, ${$(o.agentId)}::text,
         ${$(o.decision)}::text, ${json(o.total)}, ${json(o.items)}, ${$(o.railName)}::text, ${$(o.settlementRef)}::text, ${$(o.receiptId)}::text,
         ${$(o.mandateType)}::text, ${$(o.mandateRef)}::text, ${$(o.trustTier)}::text, ${json(o.buyer)}, ${$(o.source)}::text,
         ${$(o.settlementAttemptId)}::text, ${$(o.settlementStatus)}::text, ${$(o.createdAt)}::timestamptz
       from ${from} returning id`;
}

export function insertReceiptSql({ $, json }: SqlParams, r: ReceiptRow, from: string): string {
  return `insert into receipts (id, order_id, session_id, merchant_id, jws, claims, created_at)
       select ${$(r.id)}::text, ${from}.id, ${$(r.sessionId)}::text, ${$(r.merchantId)}::text, ${$(r.jws)}::text, ${json(r.claims)}, ${$(r.createdAt)}::timestamptz
       from ${from}`;
}

/**
 * An order of the session that is not this project's and mode's own ingested order (and, when
 * anchored, its merchant's), for ingest's guard statement. Five `?`: the session id, the project,
 * the mode, the merchant twice (null: any).
 */
export const FOREIGN_ORDER_OF_SESSION_SQL = `select 1 from orders where session_id = ?
       and not (source = 'ingest' and project_id = ? and livemode = ? and (cast(? as text) is null or merchant_id = ?))`;

/** A new order in the caller's unit of work (flushed with it). */
export function addOrder(em: Em, row: OrderRow): OrderRow {
  return em.create(OrderEntity, row);
}

/** A new receipt in the caller's unit of work (flushed after its order). */
export function addReceipt(em: Em, row: ReceiptRow): ReceiptRow {
  return em.create(ReceiptEntity, row);
}

/** A refund succeeded: the order's `amount_refunded` grows by its amount, in the refund's transaction. */
export async function addRefunded(tx: Em, orderId: string, amount: string): Promise<void> {
  await tx.execute('update orders set amount_refunded = amount_refunded + cast(? as numeric) where id = ?', [amount, orderId]);
}

export async function orderById(em: Em, id: string): Promise<OrderRow | null> {
  return em.findOne(OrderEntity, { id });
}

/** The order of a session at a merchant (ingest: a session reported held earlier). */
export async function orderOfSession(em: Em, sessionId: string, merchantId: string): Promise<OrderRow | null> {
  return em.findOne(OrderEntity, { sessionId, merchantId });
}

export type OrderScope = { projectId: string; livemode: boolean; merchantId?: string | undefined };

export type OrderFilters = {
  decision?: Decision | undefined;
  agentId?: string | undefined;
  trustTier?: TrustTier | undefined;
  createdGte?: Date | undefined;
  createdLt?: Date | undefined;
  /** Exactly an order id, a session id or an agent id (any case). */
  search?: string | undefined;
  /** The page continues below this order id (ids sort by creation). */
  beforeId?: string | undefined;
};

/** Newest first (by id, which sorts by creation); every filter present must hold. */
export async function listOrderRows(em: Em, scope: OrderScope, f: OrderFilters, limit: number): Promise<OrderRow[]> {
  const where: Record<string, unknown> = { projectId: scope.projectId, livemode: scope.livemode };
  if (scope.merchantId !== undefined) where.merchantId = scope.merchantId;
  if (f.decision !== undefined) where.decision = f.decision;
  if (f.agentId !== undefined) where.agentId = f.agentId;
  if (f.trustTier !== undefined) where.trustTier = f.trustTier;
  if (f.createdGte !== undefined || f.createdLt !== undefined) {
    where.createdAt = { ...(f.createdGte ? { $gte: f.createdGte } : {}), ...(f.createdLt ? { $lt: f.createdLt } : {}) };
  }
  if (f.search !== undefined) where.$or = [{ id: f.search }, { sessionId: f.search }, { agentId: { $in: [f.search, f.search.toLowerCase()] } }];
  if (f.beforeId !== undefined) where.id = { $lt: f.beforeId };
  return em.find(OrderEntity, where, { orderBy: { id: 'desc' }, limit });
}

/** One calendar day's (or the week's) figures; `acceptedVolume` is the database's numeric as text. */
export type OrderDayFigures = { date: string; acceptedVolume: string; acceptedCount: number; rejectCount: number; holdCount: number };

type FiguresRow = { date: string; accepted_volume: string; accepted_count: string | number; reject_count: string | number; hold_count: string | number };

/** Currencies whose totals are USDC volume: carts are priced in USD and settle 1:1 in USDC. */
export const USDC_VOLUME_CURRENCIES = ['USD', 'USDC'] as const;

/**
 * Figures per day of `days` (consecutive, oldest first), plus one row dated `'week'` for the
 * last `weekDays` of them. Volumes are `sum(numeric)` of accepted orders' `total.total` in USD
 * or USDC; counts are by the order's current decision, by `created_at`.
 */
export async function summarizeOrderDays(em: Em, scope: OrderScope, days: DayWindow[], weekDays: number): Promise<{ days: OrderDayFigures[]; week: OrderDayFigures }> {
  const values = days.map(() => '(?::text, ?::timestamptz, ?::timestamptz)').join(', ');
  const params: unknown[] = days.flatMap((d) => [d.date, d.start, d.end]);
  const weekFrom = days[days.length - weekDays]!.date;
  params.push(...USDC_VOLUME_CURRENCIES, scope.projectId, scope.livemode);
  let merchantClause = '';
  if (scope.merchantId !== undefined) {
    merchantClause = 'and o.merchant_id = ?';
    params.push(scope.merchantId);
  }
  params.push(weekFrom);
  const rows = await em.execute<FiguresRow[]>(
    `with d(date, start_at, end_at) as (values ${values}),
     per_day as (
       select d.date,
              coalesce(sum((o.total->>'total')::numeric) filter (where o.decision = 'accept' and o.total->>'currency' in (?, ?)), 0) as accepted_volume,
              count(o.id) filter (where o.decision = 'accept') as accepted_count,
              count(o.id) filter (where o.decision = 'reject') as reject_count,
              count(o.id) filter (where o.decision = 'hold') as hold_count
         from d left join orders o
           on o.project_id = ? and o.livemode = ? ${merchantClause}
          and o.created_at >= d.start_at and o.created_at < d.end_at
        group by d.date
     )
     select date, accepted_volume::text as accepted_volume, accepted_count, reject_count, hold_count from per_day
     union all
     select 'week', sum(accepted_volume)::text, sum(accepted_count), sum(reject_count), sum(hold_count) from per_day where date >= ?
     order by date`,
    params,
  );
  const figures = (r: FiguresRow): OrderDayFigures => ({
    date: r.date,
    acceptedVolume: r.accepted_volume,
    acceptedCount: Number(r.accepted_count),
    rejectCount: Number(r.reject_count),
    holdCount: Number(r.hold_count),
  });
  const all = rows.map(figures);
  return { days: all.filter((r) => r.date !== 'week'), week: all.find((r) => r.date === 'week')! };
}
