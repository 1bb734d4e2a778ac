import { humanOf, reasonCodes, TRUST_TIER_MEANING, type ReasonCode, type SessionView, type TrustTier, type VerdictView } from '@svc/contract';

export type VerdictReason = NonNullable<SessionView['verdictReasons']>[number];

const str = (v: unknown): string | null => (typeof v === 'string' || typeof v === 'number' ? String(v) : null);

/**
 * The verdict's reason codes in words (SessionView.verdictReasons): which policy rule decided
 * (its field name) and what it saw, from the signals the verdict was computed on
 * (./verdict.ts evaluatePolicy). A pure function of the stored verdict, so sessions gated before
 * it existed are explained too. Codes no rule produces (OK, a merchant's decline, a lapsed
 * review) read as the registry's text.
 */
export function explainVerdict(v: Pick<VerdictView, 'tier' | 'reasonCodes' | 'signals'>): VerdictReason[] {
  const s = v.signals ?? {};
  const tierOf = (t: unknown) => (typeof t === 'string' && t in TRUST_TIER_MEANING ? `${t} (${TRUST_TIER_MEANING[t as TrustTier]})` : String(t));
  const total = `${str(s.total) ?? '?'} ${str(s.currency) ?? ''}`.trim();
  const explain = (code: string): VerdictReason => {
    switch (code) {
      case 'HOLD_FOR_REVIEW':
        return {
          code,
          rule: 'holdForReviewBelowTier',
          text: `Held for review by the rule "hold agents below the ${str(s.holdForReviewBelowTier) ?? '?'} trust tier": this agent's trust tier is ${tierOf(s.tier ?? v.tier)}.`,
        };
      case 'MANDATE_REQUIRED':
        return { code, rule: 'requireMandateOverUsd', text: `The total ${total} is over ${str(s.requireMandateOverUsd) ?? '?'} USD, above which the policy requires a mandate, and the agent presented no valid one.` };
      case 'REPUTATION_TOO_LOW':
        return {
          code,
          rule: 'minReputationTier',
          text: `The agent's reputation tier is ${str(s.reputationTier) ?? '?'} (score ${str(s.reputationScore) ?? '?'}${s.reputationKnown === false ? ', an agent the reputation service does not know' : ''}); the policy's minimum reputation tier is ${str(s.minReputationTier) ?? '?'}.`,
        };
      case 'OVER_PER_TX_CAP':
        return { code, rule: 'maxPerTransactionUsd', text: `The total ${total} is over the policy's cap of ${str(s.maxPerTransactionUsd) ?? '?'} USD per order.` };
      case 'OVER_DAILY_CAP':
        return { code, rule: 'maxPerAgentPerDayUsd', text: `With this order the agent would spend ${str(s.projectedDaySpend) ?? '?'} today, over the policy's cap of ${str(s.maxPerAgentPerDayUsd) ?? '?'} USD per agent per day.` };
      case 'RATE_LIMITED_HOURLY':
        return { code, rule: 'ratePerAgentPerHour', text: `The agent already bought ${str(s.lastHour) ?? '?'} times in the last hour; the policy allows ${str(s.ratePerAgentPerHour) ?? '?'}.` };
      case 'RATE_LIMITED_DAILY':
        return { code, rule: 'ratePerAgentPerDay', text: `The agent already bought ${str(s.lastDay) ?? '?'} times in the last day; the policy allows ${str(s.ratePerAgentPerDay) ?? '?'}.` };
      case 'AGENT_BLOCKED':
        return { code, rule: 'blockedAgents', text: 'The agent is on the policy\'s list of blocked agents.' };
      case 'RAIL_NOT_ALLOWED':
        return { code, rule: 'allowedRails', text: `The ${str(s.rail) ?? '?'} rail is not among the policy's allowed rails.` };
      case 'INTENT_FORBIDDEN_KEYWORD':
        return { code, rule: 'forbiddenIntentKeywords', text: `The buyer's intent contains the forbidden keyword "${str(s.forbiddenKeyword) ?? '?'}".` };
      case 'INTENT_MISMATCH':
        return { code, rule: 'requiredIntentMatch', text: 'The policy requires the buyer\'s intent to match the mandate\'s, and it does not.' };
      default:
        return { code, rule: null, text: (reasonCodes as string[]).includes(code) ? humanOf(code as ReasonCode) : code };
    }
  };
  return v.reasonCodes.map(explain);
}
