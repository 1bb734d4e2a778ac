/** Orders, decisions and sessions reported by a merchant's own (self-hosted) checkout. */
export { ingestDecision, ingestOrder, ingestSession } from './service.js';
