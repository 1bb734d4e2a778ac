import { z } from 'zod';
import { c, IsoTimestamp, keyErrors, listEnvelope, ListQuery, meta, MerchantIdQuery, serviceValidated } from './common.js';
import { ErrorBody } from './errors.js';
import { RailName } from './merchants.js';

export const TrustTier = z.enum(['premium', 'trusted', 'standard', 'cautious']);
export type TrustTier = z.infer<typeof TrustTier>;
/**
 * What each trust tier means (decisions.md "Trust tiers"): the gate's own scale, read by the
 * policy's tier rules (holdForReviewBelowTier). It is not the reputation tier (risky … elite),
 * which the reputation service derives from the agent's score and minReputationTier reads.
 */
export const TRUST_TIER_MEANING: Record<TrustTier, string> = {
  premium: 'a valid svc mandate',
  trusted: 'a valid AP2 or ACP mandate',
  standard: 'no mandate, but a purchase history the reputation service knows',
  cautious: 'no mandate and no purchase history the reputation service knows',
};
export const ReputationTier = z.enum(['risky', 'standard', 'trusted', 'elite']);
export type ReputationTier = z.infer<typeof ReputationTier>;

const usd = z.number().finite().nonnegative();
const count = z.number().int().nonnegative();

/**
 * MerchantPolicy (decisions.md): every field optional; `null` means "no limit".
 * Defaults are applied by `resolvePolicy`. Unknown fields are a validation finding.
 */
export const MerchantPolicy = z
  .object({
    requireMandateOverUsd: usd.nullable().optional(),
    minReputationTier: ReputationTier.nullable().optional(),
    maxPerTransactionUsd: usd.nullable().optional(),
    maxPerAgentPerDayUsd: usd.nullable().optional(),
    ratePerAgentPerHour: count.nullable().optional(),
    ratePerAgentPerDay: count.nullable().optional(),
    blockedAgents: z.array(z.string()).nullable().optional(),
    allowedRails: z.array(RailName).nullable().optional(),
    forbiddenIntentKeywords: z.array(z.string()).nullable().optional(),
    requiredIntentMatch: z.boolean().nullable().optional(),
    holdForReviewBelowTier: TrustTier.nullable().optional(),
  })
  .strict();
export type MerchantPolicy = z.infer<typeof MerchantPolicy>;

/** Every MerchantPolicy field present: `null` still means no limit, except for the lists and the flag, which default to empty and false. */
export type ResolvedPolicy = Omit<{ [K in keyof MerchantPolicy]-?: Exclude<MerchantPolicy[K], undefined> }, 'blockedAgents' | 'forbiddenIntentKeywords' | 'requiredIntentMatch'> & {
  blockedAgents: string[];
  forbiddenIntentKeywords: string[];
  requiredIntentMatch: boolean;
};

export const POLICY_DEFAULTS: ResolvedPolicy = {
  requireMandateOverUsd: 20,
  minReputationTier: 'standard',
  maxPerTransactionUsd: 500,
  maxPerAgentPerDayUsd: null,
  ratePerAgentPerHour: null,
  ratePerAgentPerDay: null,
  blockedAgents: [],
  allowedRails: null,
  forbiddenIntentKeywords: [],
  requiredIntentMatch: false,
  holdForReviewBelowTier: 'cautious',
};

/** Applies decisions.md defaults: an absent field takes its default, an explicit null means no limit. */
export function resolvePolicy(body: MerchantPolicy | null | undefined): ResolvedPolicy {
  const b = body ?? {};
  const pick = <K extends keyof ResolvedPolicy>(k: K): ResolvedPolicy[K] => {
    const v = (b as Record<string, unknown>)[k];
    return (v === undefined ? POLICY_DEFAULTS[k] : v) as ResolvedPolicy[K];
  };
  return {
    requireMandateOverUsd: pick('requireMandateOverUsd'),
    minReputationTier: pick('minReputationTier'),
    maxPerTransactionUsd: pick('maxPerTransactionUsd'),
    maxPerAgentPerDayUsd: pick('maxPerAgentPerDayUsd'),
    ratePerAgentPerHour: pick('ratePerAgentPerHour'),
    ratePerAgentPerDay: pick('ratePerAgentPerDay'),
    blockedAgents: pick('blockedAgents') ?? [],
    allowedRails: pick('allowedRails'),
    forbiddenIntentKeywords: pick('forbiddenIntentKeywords') ?? [],
    requiredIntentMatch: pick('requiredIntentMatch') ?? false,
    holdForReviewBelowTier: pick('holdForReviewBelowTier'),
  };
}

/** Presets a merchant can PUT as a starting point. */
export const POLICY_PRESETS = {
  // Strict but usable: a new agent (no mandate, no history) buys small amounts; a mandate is
  // needed above $10 and the caps and rates are tight (docs/decisions.md, "Policy presets").
  STRICT: {
    requireMandateOverUsd: 10,
    minReputationTier: 'standard',
    maxPerTransactionUsd: 100,
    maxPerAgentPerDayUsd: 300,
    ratePerAgentPerHour: 5,
    ratePerAgentPerDay: 20,
    holdForReviewBelowTier: 'cautious',
  },
  BALANCED: {
    requireMandateOverUsd: 20,
    minReputationTier: 'standard',
    maxPerTransactionUsd: 500,
    maxPerAgentPerDayUsd: 2000,
    ratePerAgentPerHour: 30,
    ratePerAgentPerDay: 200,
    holdForReviewBelowTier: 'cautious',
  },
  OPEN: {
    requireMandateOverUsd: null,
    minReputationTier: 'risky',
    maxPerTransactionUsd: null,
    maxPerAgentPerDayUsd: null,
    holdForReviewBelowTier: null,
  },
} as const satisfies Record<string, MerchantPolicy>;

export const Finding = z.object({ code: z.string(), human: z.string() });
export type Finding = z.infer<typeof Finding>;

/** A finding of validate: `error` blocks publishing, `warning` does not (the configuration is publishable but probably not what was meant). */
export const ValidationFinding = Finding.extend({
  severity: z.enum(['error', 'warning']).describe('error: publish refuses the configuration; warning: publishable, but worth a look.'),
});
export type ValidationFinding = z.infer<typeof ValidationFinding>;

/**
 * Warnings for a policy that turns away every new agent: one with no mandate and no history
 * (trust tier cautious, neutral reputation "standard") is rejected or held on every purchase.
 * Pure, so the server's validate and the dashboard's policy form say the same thing.
 */
export function newAgentPolicyWarnings(body: MerchantPolicy): Finding[] {
  const p = resolvePolicy(body);
  const out: Finding[] = [];
  if (p.requireMandateOverUsd === 0) {
    out.push({ code: 'POLICY_REJECTS_NEW_AGENTS', human: 'policy.requireMandateOverUsd: 0 requires a mandate on every purchase, so every agent without one is rejected (MANDATE_REQUIRED).' });
  }
  if (p.minReputationTier === 'trusted' || p.minReputationTier === 'elite') {
    out.push({
      code: 'POLICY_REJECTS_NEW_AGENTS',
      human: `policy.minReputationTier: "${p.minReputationTier}" is above a new agent's reputation ("standard"), so every agent without history is rejected (REPUTATION_TOO_LOW).`,
    });
  }
  if (p.holdForReviewBelowTier !== null && p.holdForReviewBelowTier !== 'cautious') {
    out.push({
      code: 'POLICY_HOLDS_NEW_AGENTS',
      human: `policy.holdForReviewBelowTier: "${p.holdForReviewBelowTier}" holds every purchase of an agent without ${p.holdForReviewBelowTier === 'standard' ? 'history or a mandate' : 'a mandate'} for review (HOLD_FOR_REVIEW).`,
    });
  }
  return out;
}

export const ActivePolicy = z.object({
  id: z.string(),
  version: z.number().int(),
  body: MerchantPolicy.describe('The active MerchantPolicy as it was put (published versions are valid).'),
  hash: z.string(),
  active: z.literal(true),
  note: z.string().nullable(),
  created_at: IsoTimestamp,
});
export const NoActivePolicy = z.object({
  active: z.null(),
  version: z.literal(0),
  body: z.null(),
  hash: z.null(),
});

/** One stored version as `GET /v1/policy/versions` lists it: active or not, valid or not. */
export const StoredPolicyVersion = z.object({
  id: z.string(),
  version: z.number().int(),
  hash: z.string(),
  active: z.boolean().describe('true for the one version in force (at most one).'),
  body: z
    .record(z.string(), z.unknown())
    .describe('The body exactly as it was put. A version that was never published may hold unknown or invalid fields (validate reports them).'),
  note: z.string().nullable(),
  created_at: IsoTimestamp,
});
export type StoredPolicyVersion = z.infer<typeof StoredPolicyVersion>;

export const PutPolicyBody = z
  .object({
    body: serviceValidated(MerchantPolicy, z.record(z.string(), z.unknown()).describe('A MerchantPolicy object; unknown or mistyped fields are stored and reported by validate/publish (POLICY_FIELD_UNKNOWN, POLICY_FIELD_INVALID).')),
    note: z.string().max(1000).optional(),
  })
  .strict();

export const PublishConflict = z.object({
  published: z.literal(false),
  ok: z.literal(false),
  findings: z.array(ValidationFinding).describe('The errors that refused publish (validate\'s findings of severity error; warnings never refuse it).'),
  reason_codes: z.array(z.string()),
  error_human: z.string(),
});

export const policyContract = c.router({
  get: {
    method: 'GET',
    path: '/policy',
    query: MerchantIdQuery,
    responses: { 200: z.union([ActivePolicy, NoActivePolicy]) },
    summary: 'The active policy version',
    metadata: meta({ auth: 'key', scopes: ['policy:read'], tag: 'Policy', operationId: 'getPolicy' }),
  },
  versions: {
    method: 'GET',
    path: '/policy/versions',
    query: ListQuery(20).merge(MerchantIdQuery).strict(),
    responses: { 200: listEnvelope(StoredPolicyVersion) },
    summary: 'Every stored policy version, newest first',
    description: 'Newest (highest version) first, active or not, so two versions can be compared. next_cursor is the id of the last version of the page.',
    metadata: meta({ auth: 'key', scopes: ['policy:read'], tag: 'Policy', operationId: 'listPolicyVersions' }),
  },
  put: {
    method: 'PUT',
    path: '/policy',
    query: MerchantIdQuery,
    body: PutPolicyBody,
    responses: { 201: z.object({ id: z.string(), version: z.number().int(), hash: z.string(), active: z.literal(false) }) },
    summary: 'Store a new, inactive policy version',
    description: 'Versions are immutable; the next version is max(version)+1. It takes effect on publish.',
    metadata: meta({ auth: 'key', scopes: ['policy:write'], tag: 'Policy', operationId: 'putPolicy' }),
  },
  validate: {
    method: 'POST',
    path: '/validate',
    query: MerchantIdQuery,
    body: c.noBody(),
    responses: {
      200: z.object({
        ok: z.boolean().describe('true when no finding is an error (warnings do not stop publish).'),
        findings: z.array(ValidationFinding),
      }),
    },
    summary: 'Validate the draft configuration (no side effects)',
    description: 'Errors stop publish; warnings (POLICY_REJECTS_NEW_AGENTS, POLICY_HOLDS_NEW_AGENTS: the policy turns away every agent without a mandate or history) do not.',
    metadata: meta({ auth: 'key', scopes: ['merchants:read'], tag: 'Policy', operationId: 'validateConfig' }),
  },
  publish: {
    method: 'POST',
    path: '/publish',
    query: MerchantIdQuery,
    body: c.noBody(),
    responses: {
      200: z.object({ published: z.literal(true), ok: z.literal(true), active_policy_version: z.number().int() }),
      422: PublishConflict,
    },
    summary: 'Validate and publish the draft: activates the newest policy version',
    metadata: meta({ auth: 'key', scopes: ['merchants:write'], tag: 'Policy', operationId: 'publishConfig' }),
  },
}, { pathPrefix: '/v1', commonResponses: keyErrors });

export { ErrorBody };
