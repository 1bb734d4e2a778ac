import type { Decision, MandateType, OrderSource, Total, TrustTier } from '@svc/contract';
import { newId } from '../../lib/ids.js';
import type { OrderRow, ReceiptRow } from './entity.js';

/**
 * The one builder of each row this module owns: settlement (hosted orders) and ingest
 * (reported orders) fill them in; ./store.ts writes them (the unit of work, or its SQL
 * fragment inside settlement's accepted-settle statement).
 */

export type NewOrder = {
  sessionId: string;
  merchant: { id: string; projectId: string; livemode: boolean };
  agentId: string;
  decision: Decision;
  total: Total | null;
  items: OrderRow['items'];
  railName: string;
  mandateType: MandateType;
  mandateRef: string | null;
  trustTier: TrustTier;
  buyer: Record<string, unknown> | null;
  source: OrderSource;
  now: Date;
};

/** A new order's fields, not yet settled (no settlement reference, receipt or attempt). */
export function orderRow(o: NewOrder): OrderRow {
  return {
    id: newId('ord'),
    sessionId: o.sessionId,
    projectId: o.merchant.projectId,
    merchantId: o.merchant.id,
    livemode: o.merchant.livemode,
    agentId: o.agentId,
    decision: o.decision,
    total: o.total,
    items: o.items,
    railName: o.railName,
    settlementRef: null,
    receiptId: null,
    mandateType: o.mandateType,
    mandateRef: o.mandateRef,
    trustTier: o.trustTier,
    buyer: o.buyer,
    source: o.source,
    settlementAttemptId: null,
    settlementStatus: null,
    amountRefunded: '0',
    createdAt: o.now,
  };
}

/** A receipt's row: the signed JWS of an order and its claims. */
export function receiptRow(r: { id: string; orderId: string; sessionId: string; merchantId: string; jws: string; claims: Record<string, unknown>; now: Date }): ReceiptRow {
  return { id: r.id, orderId: r.orderId, sessionId: r.sessionId, merchantId: r.merchantId, jws: r.jws, claims: r.claims, createdAt: r.now };
}
