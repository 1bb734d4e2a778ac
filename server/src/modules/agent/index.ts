/** The agent protocol's reads and writes by merchant reference, for the other transports of it (modules/mcp). */
export { agentCatalog, agentManifest, currentMerchant, openCheckout, pollCheckout, settleMerchant } from './service.js';
