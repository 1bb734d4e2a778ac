import type { AgentReputation, RailName, ReasonCode, ReputationTier, ResolvedPolicy, TrustTier, VerdictView } from '@svc/contract';
import { addDecimal, compareDecimal, decimalFromPolicyNumber } from '../../lib/money.js';
import type { MandateResult } from './mandate.js';

export type VerdictInput = {
  policy: ResolvedPolicy;
  total: string;
  currency: string;
  rail: RailName;
  agentId: string;
  mandate: MandateResult;
  reputation: Omit<AgentReputation, 'agentId'>;
  /** Accepted and in-flight sessions of this agent at this merchant, excluding the current one. */
  velocity: { lastHour: number; lastDay: number; daySpend: string };
  /** The buyer's stated intent for this checkout. */
  intent: string | null;
};

/** The session's verdict (the contract's VerdictView) with its codes from the registry. */
export type Verdict = VerdictView & { reasonCodes: ReasonCode[] };

const REPUTATION_RANK: Record<ReputationTier, number> = { risky: 0, standard: 1, trusted: 2, elite: 3 };
const TRUST_RANK: Record<TrustTier, number> = { cautious: 0, standard: 1, trusted: 2, premium: 3 };

/** decisions.md: premium = valid svc mandate; trusted = valid ap2/acp (reserved); else by whether the agent has history. */
export function trustTier(mandate: MandateResult, agentKnown: boolean): TrustTier {
  if (mandate.present && mandate.ok && mandate.type === 'svc') return 'premium';
  if (mandate.present && mandate.ok && (mandate.type === 'ap2' || mandate.type === 'acp')) return 'trusted';
  return agentKnown ? 'standard' : 'cautious';
}

/** Lower-case, Unicode-normalized, punctuation folded to single spaces: "Buy  the Coffee!" -> "buy the coffee". */
export function normalizeIntent(s: string): string {
  return s.normalize('NFKC').toLowerCase().replace(/[^\p{L}\p{N}]+/gu, ' ').trim();
}

/**
 * The pure policy verdict (decisions.md "Policy"): every failing rule adds its code; any reject
 * rule rejects (all codes listed); otherwise the hold rule holds; otherwise accept with OK.
 * Caps are USD numbers compared as decimals against the cart total. `null` means no limit.
 */
export function evaluatePolicy(input: VerdictInput): Verdict {
  const { policy: p, total, rail, agentId, mandate, reputation, velocity } = input;
  const tier = trustTier(mandate, reputation.known);
  const rejects: ReasonCode[] = [];
  const cap = (n: number | null) => (n === null ? null : decimalFromPolicyNumber(n));

  const blocked = p.blockedAgents.some((a) => a.toLowerCase() === agentId.toLowerCase());
  if (blocked) rejects.push('AGENT_BLOCKED');

  if (p.allowedRails !== null && !p.allowedRails.includes(rail)) rejects.push('RAIL_NOT_ALLOWED');

  const mandateOver = cap(p.requireMandateOverUsd);
  if (mandateOver !== null && compareDecimal(total, mandateOver) > 0 && tier !== 'premium' && tier !== 'trusted') {
    rejects.push('MANDATE_REQUIRED');
  }

  if (p.minReputationTier !== null && REPUTATION_RANK[reputation.tier] < REPUTATION_RANK[p.minReputationTier]) {
    rejects.push('REPUTATION_TOO_LOW');
  }

  const perTx = cap(p.maxPerTransactionUsd);
  if (perTx !== null && compareDecimal(total, perTx) > 0) rejects.push('OVER_PER_TX_CAP');

  const daily = cap(p.maxPerAgentPerDayUsd);
  const projectedDaySpend = addDecimal(velocity.daySpend, total);
  if (daily !== null && compareDecimal(projectedDaySpend, daily) > 0) rejects.push('OVER_DAILY_CAP');

  if (p.ratePerAgentPerHour !== null && velocity.lastHour >= p.ratePerAgentPerHour) rejects.push('RATE_LIMITED_HOURLY');
  if (p.ratePerAgentPerDay !== null && velocity.lastDay >= p.ratePerAgentPerDay) rejects.push('RATE_LIMITED_DAILY');

  // Both the buyer's intent and the mandate's stated intent are screened: either names what is bought.
  const buyerIntent = input.intent ? normalizeIntent(input.intent) : '';
  const mandateIntent = mandate.ok && mandate.intent ? normalizeIntent(mandate.intent) : '';
  const keywords = p.forbiddenIntentKeywords.map(normalizeIntent).filter((k) => k.length > 0);
  const forbiddenHit = keywords.find((k) => buyerIntent.includes(k) || mandateIntent.includes(k)) ?? null;
  if (forbiddenHit !== null) rejects.push('INTENT_FORBIDDEN_KEYWORD');

  if (p.requiredIntentMatch) {
    const matches = buyerIntent !== '' && mandateIntent !== '' && (buyerIntent === mandateIntent || buyerIntent.includes(mandateIntent));
    if (!matches) rejects.push('INTENT_MISMATCH');
  }

  const hold = p.holdForReviewBelowTier !== null && TRUST_RANK[tier] < TRUST_RANK[p.holdForReviewBelowTier];

  const signals: Record<string, unknown> = {
    total,
    currency: input.currency,
    rail,
    tier,
    mandateType: mandate.type,
    mandatePresent: mandate.present,
    mandateOk: mandate.ok,
    reputationScore: reputation.score,
    reputationTier: reputation.tier,
    reputationKnown: reputation.known,
    lastHour: velocity.lastHour,
    lastDay: velocity.lastDay,
    daySpend: velocity.daySpend,
    projectedDaySpend,
    requireMandateOverUsd: mandateOver,
    maxPerTransactionUsd: perTx,
    maxPerAgentPerDayUsd: daily,
    ratePerAgentPerHour: p.ratePerAgentPerHour,
    ratePerAgentPerDay: p.ratePerAgentPerDay,
    minReputationTier: p.minReputationTier,
    holdForReviewBelowTier: p.holdForReviewBelowTier,
    forbiddenKeyword: forbiddenHit,
    requiredIntentMatch: p.requiredIntentMatch,
  };

  if (rejects.length > 0) return { decision: 'reject', tier, reasonCodes: rejects, signals };
  if (hold) return { decision: 'hold', tier, reasonCodes: ['HOLD_FOR_REVIEW'], signals };
  return { decision: 'accept', tier, reasonCodes: ['OK'], signals };
}

/**
 * What the gate decided and on which inputs: stored on the session (its `gate` column) while
 * held, approved or settling, so approval and phase 3 use exactly what was gated.
 */
export type GateContext = { mandate: MandateResult; verdict: Verdict; policyVersion: number; policyHash: string; fingerprintInputs: Record<string, unknown> };
