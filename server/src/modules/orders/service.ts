import type { OrderListQuery, OrdersSummary } from '@svc/contract';
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
import { listOrderRows, summarizeOrderDays, type OrderDayFigures } from './store.js';

/**
 * The order feed of the key's project and mode, newest first (ids are time-sortable), narrowed
 * by every filter given. The cursor is the last order id of the previous page: the next page is
 * the same filtered feed below it, so the filters must be sent again with it.
 */
export async function listOrders(em: Em, auth: AuthContext, q: OrderListQuery) {
  const merchantId = q.merchant_id !== undefined ? (await findMerchant(em, auth, q.merchant_id)).id : undefined;
  if (q.cursor !== undefined && !hasPrefix(q.cursor, 'ord')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
  const rows = await listOrderRows(
    em,
    { projectId: auth.projectId, livemode: auth.livemode, merchantId },
    {
      decision: q.decision,
      agentId: q.agent_id,
      trustTier: q.trust_tier,
      createdGte: q.created_gte !== undefined ? new Date(q.created_gte) : undefined,
      createdLt: q.created_lt !== undefined ? new Date(q.created_lt) : undefined,
      beforeId: q.cursor,
    },
    q.limit + 1,
  );
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map(presentOrder), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
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
