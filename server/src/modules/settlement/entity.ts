import { defineEntity, p } from '@mikro-orm/core';
import type { SessionState } from '@svc/contract';
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
