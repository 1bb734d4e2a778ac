import { z } from 'zod';
import { c, meta } from './common.js';
import { ErrorBody } from './errors.js';
import { ReputationTier } from './policy.js';

export const AgentReputation = z.object({ agentId: z.string(), score: z.number().int(), tier: ReputationTier, known: z.boolean() });
export type AgentReputation = z.infer<typeof AgentReputation>;
export const MerchantReputation = z.object({ merchantId: z.string(), score: z.number().int(), tier: ReputationTier, known: z.boolean() });

const repMeta = (operationId: string) => meta({ auth: 'public', scopes: [], tag: 'Reputation', operationId });
const AgentParams = z.object({ agentId: z.string().max(200) });
const responses = { 200: AgentReputation, 400: ErrorBody, 404: ErrorBody } as const;

/** Public and never blocks: unknown ids, outages and timeouts give the neutral default; only an id holding control characters (one that cannot exist) is 404. */
export const reputationContract = c.router({
  agent: {
    method: 'GET',
    path: '/v1/reputation/agent/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'An agent\'s reputation',
    metadata: repMeta('getAgentReputation'),
  },
  merchant: {
    method: 'GET',
    path: '/v1/reputation/merchant/:merchantId',
    pathParams: z.object({ merchantId: z.string().max(200) }),
    responses: { 200: MerchantReputation, 400: ErrorBody, 404: ErrorBody },
    summary: 'A merchant\'s reputation',
    metadata: repMeta('getMerchantReputation'),
  },
  short: {
    method: 'GET',
    path: '/v1/reputation/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'An agent\'s reputation (short form; `agent` and `merchant` are reserved)',
    metadata: repMeta('getReputationShort'),
  },
  legacy: {
    method: 'GET',
    path: '/api/v1/reputation/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'Legacy alias (accepts X-Svc-Api-Key, resolves leniently)',
    description: 'Also answers with a trailing slash (/api/v1/reputation/{agentId}/): routing is not strict about it.',
    deprecated: true,
    metadata: repMeta('getReputationLegacy'),
  },
});
