import { c } from './common.js';
import { catalogContract } from './catalog.js';
import { healthContract, meContract } from './me.js';
import { merchantsContract } from './merchants.js';
import { policyContract } from './policy.js';
import { receivingContract } from './receiving.js';
import { agentContract } from './agent.js';
import { ordersContract, sessionsContract } from './orders.js';
import { reputationContract } from './reputation.js';
import { ingestContract } from './ingest.js';
import { webhooksContract } from './webhooks.js';
import { keysContract } from './keys.js';
import { authContract } from './auth.js';
import { operatorContract } from './operator.js';
import { x402Contract } from './x402.js';
import { refundsContract } from './refunds.js';

export const contract = c.router({
  health: healthContract,
  me: meContract,
  merchants: merchantsContract,
  catalog: catalogContract,
  receiving: receivingContract,
  policy: policyContract,
  agent: agentContract,
  orders: ordersContract,
  sessions: sessionsContract,
  refunds: refundsContract,
  reputation: reputationContract,
  ingest: ingestContract,
  webhooks: webhooksContract,
  keys: keysContract,
  auth: authContract,
  operator: operatorContract,
  x402: x402Contract,
});
export type Contract = typeof contract;

export * from './common.js';
export * from './errors.js';
export * from './merchants.js';
export * from './catalog.js';
export * from './receiving.js';
export * from './policy.js';
export * from './me.js';
export * from './agent.js';
export * from './orders.js';
export * from './reputation.js';
export * from './ingest.js';
export * from './chains.js';
export * from './receipts.js';
export * from './webhooks.js';
export * from './keys.js';
export * from './auth.js';
export * from './operator.js';
export * from './x402.js';
export * from './refunds.js';
export * from './mcp.js';
