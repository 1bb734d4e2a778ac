/**
 * Checkout sessions: create, read, the payability rule, and the data access of the session
 * tables (the settlement workflow, modules/settlement, is the only writer of a session's state
 * after creation).
 */
export { totalOf, type SessionLine, type SessionRow } from './entity.js';
export {
  agentRails,
  createCheckout,
  findSession,
  findSessionByAgentKey,
  getMerchantSession,
  paymentRequiredOf,
  pollCall,
  sessionForMerchantKey,
  sessionView,
  settleCall,
} from './service.js';
export { assertPayable, awaitsPayment, paymentWindowLapsed, reviewWindowLapsed, sessionStateAt } from './state.js';
export { consumeRateLimit, enforceRateLimit, rateLimitWindow, sweepRateLimitBuckets, type RateLimitOptions } from './rate-limit.js';
export {
  acceptSessionSql,
  countHeldSessions,
  expireSession,
  HOSTED_SESSION_ID_SQL,
  lapsedSessionIds,
  lockSession,
  lockSessionForGate,
  lockSessionIfAny,
  lockSessionRow,
  lockSettleRow,
  readSettleRow,
  type LockedSettle,
  mapSessionRow,
  adoptSession,
  isSessionEntity,
  plainSession,
  settleRowStatement,
  settleRowOf,
  gateInputsStatement,
  gateInputsOf,
  type SettleRef,
  type GateSubject,
  readGateInputs,
  releaseMandateSubjects,
  releasePaymentNonces,
  reserveMandateSubject,
  reservePaymentNonce,
  settlingSessionSql,
  type AcceptedSession,
  type GateInputs,
  type NonceKey,
} from './store.js';
