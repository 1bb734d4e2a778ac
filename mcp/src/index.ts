/**
 * @svc/mcp: the buyer's MCP server (bin `svc-mcp`). The bin is what an agent host runs; these
 * exports build the same server inside another program (a custom transport, tests).
 */
export { createBuyerServer, agentIdFor, Refusal, SERVER_NAME, SERVER_VERSION, type BuyerServerOptions } from './server.js';
export { loadBuyerConfig, ConfigError, DEFAULTS, type BuyerConfig } from './config.js';
export { SpendingLedger, LedgerError, utcDay, type LedgerEntry, type DayTotals } from './ledger.js';
export { toBaseUnits, formatBaseUnits, USDC_DECIMALS } from './amounts.js';
export { makeRedactor } from './redact.js';
