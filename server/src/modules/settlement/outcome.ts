import type { ServerInferResponseBody, ServerInferResponses } from '@ts-rest/core';
import { humanOf, type contract, type ReasonCode, type SettleRejected } from '@svc/contract';
import type { Authorization } from '../../lib/eip3009.js';
import { ApiError } from '../../lib/errors.js';
import { pollCall, type SessionRow } from '../checkout/index.js';

/**
 * The workflow's one input and its outcomes. A transport (the JSON settle body, the x402
 * headers or x402 resource: modules/x402) turns its wire format into a `SettlePayment`, and
 * turns a `SettleResult` back into its wire format; the outcome types are the contract's.
 */

/** The transport-neutral payment the gate settles: the canonical form every adapter produces, with validAfter/validBefore as integers. */
export type SettlePayment = { scheme: string; authorization: Authorization; signature: string } | { mock: true };

/** What settle answers itself (the contract's settle responses; 403 only as the gate's rejection, other errors are thrown). */
export type SettleResult = Extract<ServerInferResponses<typeof contract.agent.settle>, { status: 200 | 202 | 402 }> | { status: 403; body: SettleRejected };

/** The review's outcome, with the bodies of the contract's approve and decline responses. */
export type HoldResolution =
  | { kind: 'approved'; status: 200; body: ServerInferResponseBody<typeof contract.sessions.approve, 200> }
  | { kind: 'approval_pending'; status: 202; body: ServerInferResponseBody<typeof contract.sessions.approve, 202> }
  | { kind: 'declined'; body: ServerInferResponseBody<typeof contract.sessions.decline, 200> };

export const paymentInvalid = (code: ReasonCode, human?: string): SettleResult => ({
  status: 402,
  body: { status: 'payment_invalid', reason_codes: [code], error_human: human ?? humanOf(code) },
});
export const rejected = (codes: ReasonCode[], human?: string): SettleResult => ({
  status: 403,
  body: { status: 'rejected', reason_codes: codes, error_human: human ?? humanOf(codes[0]!) },
});
export const settlementPending = (s: Pick<SessionRow, 'pathPrefix' | 'id'>): SettleResult => ({
  status: 202,
  body: { status: 'settlement_pending', reason_codes: ['SETTLEMENT_PENDING'], error_human: humanOf('SETTLEMENT_PENDING'), next: pollCall(s.pathPrefix, s.id) },
});

/** States after which a settle replays (or refuses): the gate decided. */
export const TERMINAL = new Set(['accepted', 'rejected', 'held']);

/**
 * The stored answer of a settled session, as it was sent: an accepted answer is stored with
 * `"receipt":null` in the receipt's place (its JWS is stored once, in receipts, and read with the
 * session), so the JWS goes back into that key, which keeps its position in the bytes. Answers
 * stored before migration 20261126000031 carry their receipt and are returned as they are.
 */
export function storedSettleBody(s: Pick<SessionRow, 'settleResponse' | 'receiptJws'>): Record<string, unknown> {
  const body = JSON.parse(s.settleResponse!) as Record<string, unknown>;
  if (body.status === 'accepted' && body.receipt === null && s.receiptJws) body.receipt = s.receiptJws;
  return body;
}

/** A repeat of the payment that produced a terminal result replays it; another payment is 409. */
export function replayOrConflict(s: SessionRow, paymentHash: string): SettleResult {
  if (s.settlePaymentHash === paymentHash && s.settleResponse && s.settleStatus) {
    return { status: s.settleStatus, body: storedSettleBody(s) } as SettleResult;
  }
  throw new ApiError('SESSION_ALREADY_SETTLED', `The session is already ${s.state}; a different payment cannot settle it.`);
}

/** A settle while the session's transfer is in flight: the same payment learns it is pending, another is 409. */
export function whileSettling(s: SessionRow, paymentHash: string): SettleResult {
  if (s.settlePaymentHash === paymentHash) return settlementPending(s);
  throw new ApiError('SETTLEMENT_IN_PROGRESS');
}
