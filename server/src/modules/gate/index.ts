/** The acceptance gate: pure verdict and mandate checks, and the receipt's signature. */
export { ISSUER_UNAVAILABLE_HUMAN, mandateVerifiableOffline, verifyMandate, type IssuerKeySets, type MandateContext, type MandateResult } from './mandate.js';
export { importReceiptKey, inputFingerprint, signReceipt, signRefundReceipt, type ReceiptKeys, type ReceiptSigningKey } from './receipt.js';
export { evaluatePolicy, normalizeIntent, trustTier, type GateContext, type Verdict, type VerdictInput } from './verdict.js';
export { explainVerdict, type VerdictReason } from './explain.js';
