import { defineEntity, p } from '@mikro-orm/core';
import type { GateContext } from '../gate/index.js';
import type { ChainName, MandateInput, PaymentRequired, RailName, SessionState, SessionView, Total, VerdictView } from '@svc/contract';

/** A session line as the session view shows it, plus the catalog row it was priced from. */
export type SessionLine = SessionView['lines'][number] & { productId: string };

export const CheckoutSessionEntity = defineEntity({
  name: 'CheckoutSession',
  tableName: 'checkout_sessions',
  properties: {
    id: p.string().primary(),
    merchantId: p.string(),
    livemode: p.boolean(),
    agentId: p.string().columnType('uuid'),
    state: p.string().$type<SessionState>(),
    lines: p.json<SessionLine[]>(),
    currency: p.string(),
    subtotal: p.string(),
    tax: p.string(),
    total: p.string(),
    amountBaseUnits: p.string().nullable(),
    rail: p.string().$type<RailName>(),
    payTo: p.string().nullable(),
    chain: p.string().$type<ChainName>().nullable(),
    asset: p.string().nullable(),
    buyer: p.json<Record<string, unknown>>().nullable(),
    buyerIntent: p.string().nullable(),
    mandate: p.json<MandateInput>().nullable(),
    pathPrefix: p.string(),
    idempotencyKey: p.string().nullable(),
    requestHash: p.string(),
    createResponse: p.text().nullable(),
    payment: p.json<Record<string, unknown>>().nullable(),
    verdict: p.json<VerdictView>().nullable(),
    settlePaymentHash: p.string().nullable(),
    settleStatus: p.integer().nullable(),
    settleResponse: p.text().nullable(),
    orderId: p.string().nullable(),
    receiptId: p.string().nullable(),
    /** The receipt's JWS, stored once in `receipts` (migration 20261126000031): read by join, never written here. */
    receiptJws: p.text().formula((cols) => `(select r.jws from receipts r where r.id = ${cols.receiptId})`).nullable(),
    settlementRef: p.string().nullable(),
    policyVersion: p.integer().nullable(),
    policyHash: p.string().nullable(),
    /** The gate's result while held or settling, so approval and phase 3 use exactly what was gated. */
    gate: p.json<GateContext>().nullable(),
    /** Why the last attempt to pay failed (shown on the poll until the next settle). */
    paymentError: p.json<NonNullable<SessionView['paymentError']>>().nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
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
