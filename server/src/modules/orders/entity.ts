import { defineEntity, p } from '@mikro-orm/core';
import type { Total } from '@svc/contract';

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
    decision: p.string().$type<'accept' | 'reject' | 'hold'>(),
    total: p.json<Total>().nullable(),
    items: p.json<Array<{ sku: string; qty: number }>>(),
    railName: p.string(),
    settlementRef: p.string().nullable(),
    receiptId: p.string().nullable(),
    mandateType: p.string().$type<'svc' | 'ap2' | 'acp' | 'none'>(),
    mandateRef: p.string().nullable(),
    trustTier: p.string().$type<'premium' | 'trusted' | 'standard' | 'cautious'>(),
    buyer: p.json<Record<string, unknown>>().nullable(),
    source: p.string().default('hosted'),
    /** Accepted hosted orders: the settled attempt that moved the funds (a constraint requires it). */
    settlementAttemptId: p.string().nullable(),
    settlementStatus: p.string().$type<'settled'>().nullable(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});
export type OrderRow = InstanceType<typeof OrderEntity.class>;

export const ReceiptEntity = defineEntity({
  name: 'Receipt',
  tableName: 'receipts',
  properties: {
    id: p.string().primary(),
    orderId: p.string(),
    sessionId: p.string(),
    merchantId: p.string(),
    jws: p.text(),
    claims: p.json<Record<string, unknown>>(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
  },
});
