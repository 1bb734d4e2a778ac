import { defineEntity, p } from '@mikro-orm/core';
import type { ChainName, RefundReason, SessionState } from '@svc/contract';
import type { PaymentProof } from '../../rails/types.js';

/** The session state an attempt returns to when it fails (nothing moved). */
export type ReturnState = Extract<SessionState, 'awaiting_payment' | 'held' | 'approved'>;

/**
 * One accepted payment on its way to the chain (docs/settlement.md). Written by phase 1,
 * resolved by phase 3 or by the reconciler; never deleted.
 */
export const SettlementAttemptEntity = defineEntity({
  name: 'SettlementAttempt',
  tableName: 'settlement_attempts',
  properties: {
    id: p.string().primary(),
    sessionId: p.string(),
    merchantId: p.string(),
    livemode: p.boolean(),
    returnState: p.string().$type<ReturnState>(),
    rail: p.string(),
    facilitator: p.string(),
    chain: p.string().nullable(),
    payer: p.string().nullable(),
    nonce: p.string().nullable(),
    amountBaseUnits: p.string().nullable(),
    proof: p.json<PaymentProof>().nullable(),
    paymentHash: p.string(),
    status: p.string().$type<'pending' | 'settled' | 'failed'>(),
    reference: p.string().nullable(),
    failureCode: p.string().nullable(),
    failureHuman: p.string().nullable(),
    leaseUntil: p.datetime().columnType('timestamptz'),
    createdAt: p.datetime().columnType('timestamptz'),
    resolvedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
export type AttemptRow = InstanceType<typeof SettlementAttemptEntity.class>;

/** A transaction that may carry an attempt's authorization, stored before it is sent. */
export const SettlementTransactionEntity = defineEntity({
  name: 'SettlementTransaction',
  tableName: 'settlement_transactions',
  properties: {
    txHash: p.string().primary(),
    attemptId: p.string(),
    rawTx: p.text().nullable(),
    relayer: p.string().nullable(),
    relayerNonce: p.bigint('number').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});

export type RefundStatus = 'requires_authorization' | 'pending' | 'succeeded' | 'failed' | 'canceled';

/**
 * A refund of a settled x402 capture (docs/settlement.md "Refunds"): the EIP-3009 authorization
 * the merchant is asked to sign (from its receiving address to the payer), then its signature,
 * the transfer and the receipt. The database keeps the capture's awaiting, pending and
 * succeeded refunds within what it captured (trigger `refunds_within_capture`).
 */
export const RefundEntity = defineEntity({
  name: 'Refund',
  tableName: 'refunds',
  properties: {
    id: p.string().primary(),
    orderId: p.string(),
    settlementAttemptId: p.string(),
    projectId: p.string(),
    merchantId: p.string(),
    livemode: p.boolean(),
    status: p.string().$type<RefundStatus>(),
    amount: p.string(),
    amountBaseUnits: p.string().columnType('numeric(78,0)'),
    currency: p.string(),
    reason: p.string().$type<RefundReason>().nullable(),
    metadata: p.json<Record<string, unknown>>().nullable(),
    chain: p.string().$type<ChainName>(),
    fromAddress: p.string(),
    toAddress: p.string(),
    nonce: p.string(),
    validAfter: p.bigint('number'),
    validBefore: p.bigint('number'),
    signature: p.string().nullable(),
    facilitator: p.string().nullable(),
    reference: p.string().nullable(),
    failureCode: p.string().nullable(),
    failureHuman: p.string().nullable(),
    receiptJws: p.text().nullable(),
    leaseUntil: p.datetime().columnType('timestamptz').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
    updatedAt: p.datetime().columnType('timestamptz'),
    resolvedAt: p.datetime().columnType('timestamptz').nullable(),
  },
});
export type RefundRow = InstanceType<typeof RefundEntity.class>;

/** A transaction that may carry a refund's authorization, stored before it is sent (live facilitators). */
export const RefundTransactionEntity = defineEntity({
  name: 'RefundTransaction',
  tableName: 'refund_transactions',
  properties: {
    txHash: p.string().primary(),
    refundId: p.string(),
    rawTx: p.text().nullable(),
    relayer: p.string().nullable(),
    relayerNonce: p.bigint('number').nullable(),
    createdAt: p.datetime().columnType('timestamptz'),
  },
});
