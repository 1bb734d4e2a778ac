import type { Order, OrderEventObject } from '@svc/contract';
import type { OrderRow } from './entity.js';

/** The order feed's projection (interface 2.5, the contract's Order). */
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

/** The order object of an event's `data.object` (interface section 6, the contract's OrderEventObject). */
export function presentOrderEvent(o: OrderRow): OrderEventObject {
  return {
    id: o.id,
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
