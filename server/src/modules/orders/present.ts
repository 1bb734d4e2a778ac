import type { Order, OrderEventObject, RefundStatusOfOrder } from '@svc/contract';
import { compareDecimal, formatAtScale, placesOf } from '../../lib/money.js';
import type { OrderRow } from './entity.js';

/**
 * The order's succeeded refunds at the scale of its total (at least 2 places), and how much of
 * the order they give back: `full` once they reach the total (a capture is the total rounded up
 * to a base unit, and refunds never pass the capture).
 */
export function refundFigures(o: Pick<OrderRow, 'amountRefunded' | 'total'>): { amount_refunded: string; refund_status: RefundStatusOfOrder } {
  const refunded = String(o.amountRefunded ?? '0');
  const total = o.total ?? null;
  const scale = Math.max(2, total ? placesOf(total.total) : 2);
  const amount = formatAtScale(refunded, scale);
  if (compareDecimal(refunded, '0') <= 0) return { amount_refunded: amount, refund_status: 'none' };
  const full = total !== null && compareDecimal(refunded, total.total) >= 0;
  return { amount_refunded: amount, refund_status: full ? 'full' : 'partial' };
}

/** The order feed's projection (interface 2.5, the contract's Order). */
export function presentOrder(o: OrderRow): Order {
  return {
    id: o.id,
    source: o.source,
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
    ...refundFigures(o),
    created_at: o.createdAt.toISOString(),
  };
}

/** The order object of an event's `data.object` (interface section 6, the contract's OrderEventObject). */
export function presentOrderEvent(o: OrderRow): OrderEventObject {
  return {
    id: o.id,
    source: o.source,
    session_id: o.sessionId,
    merchant_id: o.merchantId,
    agent_id: o.agentId,
    total: o.total ?? null,
    items: o.items,
    rail_name: o.railName,
    ...(o.settlementRef ? { settlement_ref: o.settlementRef } : {}),
    ...(o.receiptId ? { receipt_id: o.receiptId } : {}),
    mandate_type: o.mandateType,
    mandate_ref: o.mandateRef ?? null,
    trust_tier: o.trustTier,
    ...(o.buyer ? { buyer: o.buyer } : {}),
  };
}

/**
 * An order event object read back from `events.payload` (jsonb, which reorders keys) in the
 * key order `presentOrderEvent` writes: the bytes a replay freezes keep the documented order.
 */
export function reorderOrderEventObject(o: OrderEventObject): OrderEventObject {
  return {
    id: o.id,
    source: o.source,
    session_id: o.session_id,
    merchant_id: o.merchant_id,
    agent_id: o.agent_id,
    total: o.total ? { currency: o.total.currency, subtotal: o.total.subtotal, tax: o.total.tax, total: o.total.total } : null,
    items: o.items.map((i) => ({ sku: i.sku, qty: i.qty })),
    rail_name: o.rail_name,
    ...(o.settlement_ref ? { settlement_ref: o.settlement_ref } : {}),
    ...(o.receipt_id ? { receipt_id: o.receipt_id } : {}),
    mandate_type: o.mandate_type,
    mandate_ref: o.mandate_ref ?? null,
    trust_tier: o.trust_tier,
    ...(o.buyer ? { buyer: o.buyer } : {}),
  };
}
