import type { Em } from '../../db/orm.js';
import type { AuthContext, Ctx } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { CheckoutSessionEntity, type SessionRow } from '../checkout/entity.js';
import { sessionView } from '../checkout/service.js';
import { resolveHold } from '../checkout/settle.js';
import { MerchantEntity } from '../merchants/entity.js';
import { findMerchant, type MerchantRow } from '../merchants/service.js';
import { OrderEntity } from './entity.js';
import { presentOrder } from './present.js';

/** The order feed of the key's project and mode, newest first (ids are time-sortable). */
export async function listOrders(em: Em, auth: AuthContext, q: { limit: number; cursor?: string; merchant_id?: string }) {
  const where: Record<string, unknown> = { projectId: auth.projectId, livemode: auth.livemode };
  if (q.merchant_id !== undefined) where.merchantId = (await findMerchant(em, auth, q.merchant_id)).id;
  if (q.cursor) {
    if (!hasPrefix(q.cursor, 'ord')) throw new ApiError('VALIDATION_FAILED', 'query.cursor: is not a cursor returned by this list.');
    where.id = { $lt: q.cursor };
  }
  const rows = await em.find(OrderEntity, where, { orderBy: { id: 'desc' }, limit: q.limit + 1 });
  const page = rows.slice(0, q.limit);
  const hasMore = rows.length > q.limit;
  return { data: page.map(presentOrder), has_more: hasMore, next_cursor: hasMore ? page.at(-1)!.id : null };
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
