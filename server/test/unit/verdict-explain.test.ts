import { resolvePolicy, type MerchantPolicy } from '@svc/contract';
import { describe, expect, it } from 'vitest';
import { explainVerdict } from '../../src/modules/gate/explain.js';
import { evaluatePolicy, type VerdictInput } from '../../src/modules/gate/verdict.js';

/** The verdict in words (SessionView.verdictReasons, issue 29): each code names the policy rule that decided and what it saw. */
const base = (policy: MerchantPolicy, over: Partial<VerdictInput> = {}): VerdictInput => ({
  policy: resolvePolicy(policy),
  total: '42.00',
  currency: 'USD',
  rail: 'x402',
  agentId: '6f1c2a52-7d0e-4a8b-9a51-2f4f1d6f3c10',
  mandate: { type: 'none', present: false, ok: true, ref: null },
  reputation: { score: 500, tier: 'standard', known: false },
  velocity: { lastHour: 3, lastDay: 9, daySpend: '100.00' },
  intent: null,
  ...over,
});
const open: MerchantPolicy = { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null, maxPerTransactionUsd: null, maxPerAgentPerDayUsd: null };

describe('explainVerdict', () => {
  it('GIVEN an unknown agent and a policy holding below standard THEN the hold names holdForReviewBelowTier and the trust tier with its meaning', () => {
    const v = evaluatePolicy(base({ ...open, holdForReviewBelowTier: 'standard' }));
    expect(explainVerdict(v)).toEqual([
      {
        code: 'HOLD_FOR_REVIEW',
        rule: 'holdForReviewBelowTier',
        text: 'Held for review by the rule "hold agents below the standard trust tier": this agent\'s trust tier is cautious (no mandate and no purchase history the reputation service knows).',
      },
    ]);
  });

  it('GIVEN several rejecting rules THEN one reason each, in the verdict\'s order, with the figures the rule compared', () => {
    const v = evaluatePolicy(base({ ...open, requireMandateOverUsd: 10, minReputationTier: 'trusted', maxPerTransactionUsd: 40, maxPerAgentPerDayUsd: 120, ratePerAgentPerHour: 3 }));
    const reasons = explainVerdict(v);
    expect(reasons.map((r) => [r.code, r.rule])).toEqual([
      ['MANDATE_REQUIRED', 'requireMandateOverUsd'],
      ['REPUTATION_TOO_LOW', 'minReputationTier'],
      ['OVER_PER_TX_CAP', 'maxPerTransactionUsd'],
      ['OVER_DAILY_CAP', 'maxPerAgentPerDayUsd'],
      ['RATE_LIMITED_HOURLY', 'ratePerAgentPerHour'],
    ]);
    expect(reasons[1]!.text).toBe("The agent's reputation tier is standard (score 500, an agent the reputation service does not know); the policy's minimum reputation tier is trusted.");
    expect(reasons[2]!.text).toBe("The total 42.00 USD is over the policy's cap of 40 USD per order.");
    expect(reasons[3]!.text).toBe("With this order the agent would spend 142.00 today, over the policy's cap of 120 USD per agent per day.");
  });

  it('GIVEN codes no rule produces THEN the registry\'s text and no rule; an unknown code reads as itself', () => {
    expect(explainVerdict({ tier: 'standard', reasonCodes: ['OK', 'REVIEW_WINDOW_EXPIRED', 'SOMETHING_NEW'], signals: {} })).toEqual([
      { code: 'OK', rule: null, text: 'Accepted.' },
      { code: 'REVIEW_WINDOW_EXPIRED', rule: null, text: 'The hold review window passed without a decision.' },
      { code: 'SOMETHING_NEW', rule: null, text: 'SOMETHING_NEW' },
    ]);
  });
});
