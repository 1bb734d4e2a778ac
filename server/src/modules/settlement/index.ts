/**
 * The payment workflow (docs/settlement.md): settle, hold review, re-authorization, the
 * settlement engine's phases, the reconciler and their compensation steps.
 */
export { settleSession, type SettleInput, type SettleMerchantRef } from './settle.js';
export { approveHold, declineHold, resolveHold, APPROVAL_MIN_VALIDITY_SECONDS, type ReviewInput } from './review.js';
export { HOLD_REVIEW_SECONDS, reviewUrl } from './finish.js';
export { paymentInvalid, type HoldResolution, type SettlePayment, type SettleResult } from './outcome.js';
export { startSettlementWorker, type SettlementWorker } from './reconciler.js';
export { countAttemptsByStatus } from './store.js';
