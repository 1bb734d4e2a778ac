import type { OrderListQuery, OrdersSummary } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { AuthContext, Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { CheckoutSessionEntity, type SessionRow } from '../checkout/entity.js';
import { sessionView } from '../checkout/service.js';
import { resolveHold } from '../checkout/settle.js';
import { MerchantEntity } from '../merchants/entity.js';
import { findMerchant, type MerchantRow } from '../merchants/index.js';
import { formatAtScale } from '../../lib/money.js';
import { lastDays } from '../../lib/time.js';
import { countHeldSessions } from '../checkout/store.js';
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

/** A session of one of the key's merchants (project and mode), else 404. */
export async function sessionForMerchantKey(em: Em, auth: AuthContext, id: string): Promise<{ session: SessionRow; merchant: MerchantRow }> {
  const session = hasPrefix(id, 'sess') ? await em.findOne(CheckoutSessionEntity, { id }) : null;
  const merchant = session ? await em.findOne(MerchantEntity, { id: session.merchantId, projectId: auth.projectId, livemode: auth.livemode }) : null;
  if (!session || !merchant) throw new ApiError('NOT_FOUND', 'No such session.');
  return { session, merchant };
}

/** GET /v1/sessions/<id>: the poll view of one of the key's sessions. */
export async function getMerchantSession(ctx: Ctx & { auth: AuthContext }, id: string) {
  const { session } = await sessionForMerchantKey(ctx.em, ctx.auth, id);
  return sessionView(session, ctx.services.now());
}

/** POST /v1/sessions/<id>/approve: 200 when captured, 202 while the chain or the agent is awaited. */
export async function approveHeldSession(ctx: Ctx & { auth: AuthContext }, id: string) {
  const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, id);
  const out = await resolveHold(ctx, merchant, id, 'approve');
  if (out.kind === 'approved') return { status: 200 as const, body: out.body };
  if (out.kind === 'approval_pending') return { status: 202 as const, body: out.body };
  throw new ApiError('SESSION_NOT_HELD');
}

/** POST /v1/sessions/<id>/decline. */
export async function declineHeldSession(ctx: Ctx & { auth: AuthContext }, id: string) {
  const { merchant } = await sessionForMerchantKey(ctx.em, ctx.auth, id);
  const out = await resolveHold(ctx, merchant, id, 'decline');
  if (out.kind !== 'declined') throw new ApiError('SESSION_NOT_HELD');
  return out.body;
}
