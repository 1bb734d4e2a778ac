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

/**
 * Public and never blocks: unknown ids, outages and timeouts give the neutral default; only an id holding control characters (one that cannot exist) is 404.
 * Reputation is kept per mode. An agent's score answers in the mode and project view of a valid key (Authorization: Bearer, or X-Svc-Api-Key) or
 * dashboard session, else the shared live score; a merchant's answers in the merchant's own mode (docs/decisions.md, "Reputation: per mode").
 */
const AGENT_READ =
  'Reputation is kept per mode. With a valid API key (Authorization: Bearer, or X-Svc-Api-Key) or the dashboard session: the score in that key\'s mode as its project sees it (the shared score plus what the project itself reported through /v1/ingest: what its own gate reads). Without one, or with one that does not resolve: the shared live score. Never fails.';
export const reputationContract = c.router({
  agent: {
    method: 'GET',
    path: '/v1/reputation/agent/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'An agent\'s reputation',
    description: AGENT_READ,
    metadata: repMeta('getAgentReputation'),
  },
  merchant: {
    method: 'GET',
    path: '/v1/reputation/merchant/:merchantId',
    pathParams: z.object({ merchantId: z.string().max(200) }),
    responses: { 200: MerchantReputation, 400: ErrorBody, 404: ErrorBody },
    summary: 'A merchant\'s reputation',
    description: 'In the merchant\'s own mode (a merchant belongs to one); with a key or session of the merchant\'s project, including what that project reported through /v1/ingest. Never fails.',
    metadata: repMeta('getMerchantReputation'),
  },
  short: {
    method: 'GET',
    path: '/v1/reputation/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'An agent\'s reputation (short form; `agent` and `merchant` are reserved)',
    description: AGENT_READ,
    metadata: repMeta('getReputationShort'),
  },
  legacy: {
    method: 'GET',
    path: '/api/v1/reputation/:agentId',
    pathParams: AgentParams,
    responses,
    summary: 'Legacy alias (accepts X-Svc-Api-Key, resolves leniently)',
    description: `Also answers with a trailing slash (/api/v1/reputation/{agentId}/): routing is not strict about it. ${AGENT_READ}`,
    deprecated: true,
    metadata: repMeta('getReputationLegacy'),
  },
});
