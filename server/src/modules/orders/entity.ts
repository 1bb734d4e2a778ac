import { defineEntity, p } from '@mikro-orm/core';
import type { Decision, MandateType, OrderEventObject, OrderSource, Total, TrustTier } from '@svc/contract';

export const OrderEntity = defineEntity({
  name: 'Order',
  tableName: 'orders',
  properties: {
    id: p.string().primary(),
    sessionId: p.string(),
    projectId: p.string(),
    merchantId: p.string(),
    livemode: p.boolean(),
    agentId: p.string(),
    decision: p.string().$type<Decision>(),
    total: p.json<Total>().nullable(),
    items: p.json<OrderEventObject['items']>(),
    railName: p.string(),
    settlementRef: p.string().nullable(),
    receiptId: p.string().nullable(),
    mandateType: p.string().$type<MandateType>(),
    mandateRef: p.string().nullable(),
    trustTier: p.string().$type<TrustTier>(),
    buyer: p.json<Record<string, unknown>>().nullable(),
    /** `hosted` (gated and settled here) or `ingest` (reported by a self-hosted checkout); every insert names it (no default). */
    source: p.string().$type<OrderSource>(),
    /**
     * Accepted hosted orders: the settled attempt that moved the funds (orders_settlement_attempt_fk
     * requires it). A plain column, not a relation: settlement sits above orders, and the
     * constraint is checked at commit, so a flush may write the attempt and the order in any order.
     */
    settlementAttemptId: p.string().fieldName('settlement_attempt_id').nullable(),
    settlementStatus: p.string().$type<'settled'>().nullable(),
    /** The order's succeeded refunds (numeric, in the order's currency), added by settlement's refund workflow (`addRefunded`). */
    amountRefunded: p.string().columnType('numeric'),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});
export type OrderRow = InstanceType<typeof OrderEntity.class>;

export const ReceiptEntity = defineEntity({
  name: 'Receipt',
  tableName: 'receipts',
  properties: {
    id: p.string().primary(),
    /** A relation mapped to its key: the unit of work inserts the order before its receipt. */
    orderId: () => p.manyToOne(OrderEntity).mapToPk().fieldName('order_id'),
    sessionId: p.string(),
    merchantId: p.string(),
    jws: p.text(),
    claims: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});
export type ReceiptRow = InstanceType<typeof ReceiptEntity.class>;
