import { defineEntity, p } from '@mikro-orm/core';
import type { PaymentRequired, Total } from '@svc/contract';

export type SessionLine = { sku: string; name: string; qty: number; unitPrice: string; lineTotal: string; productId: string };
export type StoredVerdict = { decision: 'accept' | 'reject' | 'hold'; tier: string; reasonCodes: string[]; signals: Record<string, unknown> };
export type StoredMandate = { type: 'svc' | 'ap2' | 'acp' | 'none'; token?: string; raw?: unknown };

export const CheckoutSessionEntity = defineEntity({
  name: 'CheckoutSession',
  tableName: 'checkout_sessions',
  properties: {
    id: p.string().primary(),
    merchantId: p.string(),
    livemode: p.boolean(),
    agentId: p.string().columnType('uuid'),
    state: p.string().$type<'awaiting_payment' | 'settling' | 'accepted' | 'rejected' | 'held' | 'approved' | 'expired'>(),
    lines: p.json<SessionLine[]>(),
    currency: p.string(),
    subtotal: p.string(),
    tax: p.string(),
    total: p.string(),
    amountBaseUnits: p.string().nullable(),
    rail: p.string().$type<'x402' | 'card' | 'mock'>(),
    payTo: p.string().nullable(),
    chain: p.string().$type<'base' | 'base-sepolia'>().nullable(),
    asset: p.string().nullable(),
    buyer: p.json<Record<string, unknown>>().nullable(),
    buyerIntent: p.string().nullable(),
    mandate: p.json<StoredMandate>().nullable(),
    pathPrefix: p.string(),
    idempotencyKey: p.string().nullable(),
    requestHash: p.string(),
    createResponse: p.text().nullable(),
    payment: p.json<Record<string, unknown>>().nullable(),
    verdict: p.json<StoredVerdict>().nullable(),
    settlePaymentHash: p.string().nullable(),
    settleStatus: p.integer().nullable(),
    settleResponse: p.text().nullable(),
    orderId: p.string().nullable(),
    receiptId: p.string().nullable(),
    receiptJws: p.text().nullable(),
    settlementRef: p.string().nullable(),
    policyVersion: p.integer().nullable(),
    policyHash: p.string().nullable(),
    /** The gate's result while held or settling, so approval and phase 3 use exactly what was gated. */
    gate: p.json<Record<string, unknown>>().nullable(),
    /** Why the last attempt to pay failed (shown on the poll until the next settle). */
    paymentError: p.json<{ reasonCodes: string[]; errorHuman: string }>().nullable(),
    createdAt: p.datetime().columnType('timestamptz').onCreate(() => new Date()),
    expiresAt: p.datetime().columnType('timestamptz'),
    settledAt: p.datetime().columnType('timestamptz').nullable(),
    holdExpiresAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
export type SessionRow = InstanceType<typeof CheckoutSessionEntity.class>;

export function totalOf(s: Pick<SessionRow, 'currency' | 'subtotal' | 'tax' | 'total'>): Total {
  return { currency: s.currency, subtotal: s.subtotal, tax: s.tax, total: s.total };
}
export type { PaymentRequired };
