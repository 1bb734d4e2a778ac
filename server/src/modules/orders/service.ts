import type { Order } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import type { AuthContext } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { hasPrefix } from '../../lib/ids.js';
import { CheckoutSessionEntity, type SessionRow } from '../checkout/entity.js';
import { MerchantEntity } from '../merchants/entity.js';
import { findMerchant, type MerchantRow } from '../merchants/service.js';
import { OrderEntity, type OrderRow } from './entity.js';

export function presentOrder(o: OrderRow): Order {
  return {
    id: o.id,
    session_id: o.sessionId,
    merchant_id: o.merchantId,
    agent_id: o.agentId,
    decision: o.decision,
    total: o.total ?? null,
    rail_name: o.railName,
    ...(o.decision === 'accept' && o.settlementRef ? { settlement_ref: o.settlementRef } : {}),
    ...(o.decision === 'accept' && o.receiptId ? { receipt_id: o.receiptId } : {}),
    mandate_type: o.mandateType,
    trust_tier: o.trustTier,
    livemode: o.livemode,
    created_at: o.createdAt.toISOString(),
  };
}

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
