import { resolvePolicy, type MerchantPolicy } from '@svc/contract';
import { describe, expect, it } from 'vitest';
import type { MandateResult } from '../../src/modules/gate/mandate.js';
import { evaluatePolicy, normalizeIntent, trustTier, type VerdictInput } from '../../src/modules/gate/verdict.js';

const AGENT = '6f1c2a52-7d0e-4a8b-9a51-2f4f1d6f3c10';
const NO_MANDATE: MandateResult = { type: 'none', present: false, ok: true, ref: null };
const SVC_OK: MandateResult = { type: 'svc', present: true, ok: true, ref: 'm-1', issuer: 'iss', subject: 'm-1', intent: 'coffee beans', maxAmount: '100.00' };
const SVC_BAD: MandateResult = { type: 'svc', present: true, ok: false, code: 'MANDATE_EXPIRED', ref: null };

/** A neutral input that accepts under OPEN-ish settings; each test changes one thing. */
function input(policy: MerchantPolicy = {}, over: Partial<VerdictInput> = {}): VerdictInput {
  return {
    policy: resolvePolicy(policy),
    total: '10.00',
    currency: 'USD',
    rail: 'x402',
    agentId: AGENT,
    mandate: NO_MANDATE,
    reputation: { score: 500, tier: 'standard', known: true },
    velocity: { lastHour: 0, lastDay: 0, daySpend: '0' },
    intent: null,
    ...over,
  };
}

describe('trust tier', () => {
  it('premium = valid svc; trusted = valid ap2/acp; else standard if known, cautious if not', () => {
    expect(trustTier(SVC_OK, false)).toBe('premium');
    expect(trustTier({ type: 'ap2', present: true, ok: true, ref: 'x' }, false)).toBe('trusted');
    expect(trustTier({ type: 'acp', present: true, ok: true, ref: 'x' }, true)).toBe('trusted');
    expect(trustTier(NO_MANDATE, true)).toBe('standard');
    expect(trustTier(NO_MANDATE, false)).toBe('cautious');
    expect(trustTier(SVC_BAD, true)).toBe('standard');
    expect(trustTier(SVC_BAD, false)).toBe('cautious');
  });

  it('GIVEN an ap2 or acp mandate that did not verify THEN no trust from it: cautious or standard as without one', () => {
    for (const type of ['ap2', 'acp'] as const) {
      const bad: MandateResult = { type, present: true, ok: false, code: 'MANDATE_INVALID_SIGNATURE', ref: null };
      expect(trustTier(bad, false), type).toBe('cautious');
      expect(trustTier(bad, true), type).toBe('standard');
    }
  });
});

describe('evaluatePolicy with the defaults (resolvePolicy({}))', () => {
  it('GIVEN a known agent, 10.00, no mandate THEN accept OK', () => {
    const v = evaluatePolicy(input());
    expect(v).toMatchObject({ decision: 'accept', tier: 'standard', reasonCodes: ['OK'] });
  });
  it('requires a mandate over 20 USD, not at 20', () => {
    expect(evaluatePolicy(input({}, { total: '20.00' })).decision).toBe('accept');
    expect(evaluatePolicy(input({}, { total: '20.01' })).reasonCodes).toEqual(['MANDATE_REQUIRED']);
    expect(evaluatePolicy(input({}, { total: '20.01', mandate: SVC_OK }))).toMatchObject({ decision: 'accept', tier: 'premium' });
  });
  it('caps a transaction at 500 USD', () => {
    expect(evaluatePolicy(input({}, { total: '500.00', mandate: SVC_OK })).decision).toBe('accept');
    expect(evaluatePolicy(input({}, { total: '500.000001', mandate: SVC_OK })).reasonCodes).toEqual(['OVER_PER_TX_CAP']);
  });
  it('minimum reputation tier is standard', () => {
    expect(evaluatePolicy(input({}, { reputation: { score: 399, tier: 'risky', known: true } })).reasonCodes).toEqual(['REPUTATION_TOO_LOW']);
  });
  it('holds nothing by default (nothing is below cautious)', () => {
    expect(evaluatePolicy(input({}, { reputation: { score: 500, tier: 'standard', known: false } }))).toMatchObject({
      decision: 'accept',
      tier: 'cautious',
    });
  });
  it('has no daily cap or rate limits by default', () => {
    const v = evaluatePolicy(input({}, { velocity: { lastHour: 10_000, lastDay: 100_000, daySpend: '999999999.00' } }));
    expect(v.decision).toBe('accept');
  });
});

describe('evaluatePolicy rule by rule', () => {
  it('AGENT_BLOCKED: blockedAgents contains the agent, case-insensitively', () => {
    expect(evaluatePolicy(input({ blockedAgents: [AGENT.toUpperCase()] })).reasonCodes).toEqual(['AGENT_BLOCKED']);
    expect(evaluatePolicy(input({ blockedAgents: ['00000000-0000-4000-8000-000000000000'] })).decision).toBe('accept');
  });

  it('RAIL_NOT_ALLOWED: allowedRails is set and excludes the rail; null allows all', () => {
    expect(evaluatePolicy(input({ allowedRails: ['mock'] })).reasonCodes).toEqual(['RAIL_NOT_ALLOWED']);
    expect(evaluatePolicy(input({ allowedRails: ['x402'] })).decision).toBe('accept');
    expect(evaluatePolicy(input({ allowedRails: null }, { rail: 'card' })).decision).toBe('accept');
  });

  it('MANDATE_REQUIRED: total over requireMandateOverUsd without a valid mandate; null = never', () => {
    expect(evaluatePolicy(input({ requireMandateOverUsd: 0 }, { total: '0.01' })).reasonCodes).toEqual(['MANDATE_REQUIRED']);
    expect(evaluatePolicy(input({ requireMandateOverUsd: 0 }, { total: '0.00' })).decision).toBe('accept');
    expect(evaluatePolicy(input({ requireMandateOverUsd: 5 }, { total: '10.00', mandate: SVC_BAD })).reasonCodes).toEqual(['MANDATE_REQUIRED']);
    expect(evaluatePolicy(input({ requireMandateOverUsd: 5 }, { total: '10.00', mandate: SVC_OK })).decision).toBe('accept');
    expect(evaluatePolicy(input({ requireMandateOverUsd: 5 }, { mandate: { type: 'ap2', present: true, ok: true, ref: 'x' } })).decision).toBe('accept');
    expect(evaluatePolicy(input({ requireMandateOverUsd: null }, { total: '499.99' })).decision).toBe('accept');
  });

  it('MANDATE_REQUIRED compares exactly: a cap of 0.1 with total 0.10 passes, 0.11 fails', () => {
    expect(evaluatePolicy(input({ requireMandateOverUsd: 0.1 }, { total: '0.10' })).decision).toBe('accept');
    expect(evaluatePolicy(input({ requireMandateOverUsd: 0.1 }, { total: '0.11' })).reasonCodes).toEqual(['MANDATE_REQUIRED']);
  });

  it('REPUTATION_TOO_LOW: risky < standard < trusted < elite; null = no minimum', () => {
    const rep = (tier: 'risky' | 'standard' | 'trusted' | 'elite') => ({ reputation: { score: 600, tier, known: true } });
    expect(evaluatePolicy(input({ minReputationTier: 'trusted' }, rep('standard'))).reasonCodes).toEqual(['REPUTATION_TOO_LOW']);
    expect(evaluatePolicy(input({ minReputationTier: 'trusted' }, rep('trusted'))).decision).toBe('accept');
    expect(evaluatePolicy(input({ minReputationTier: 'trusted' }, rep('elite'))).decision).toBe('accept');
    expect(evaluatePolicy(input({ minReputationTier: 'elite' }, rep('trusted'))).reasonCodes).toEqual(['REPUTATION_TOO_LOW']);
    expect(evaluatePolicy(input({ minReputationTier: null }, rep('risky'))).decision).toBe('accept');
  });

  it('OVER_PER_TX_CAP: total > maxPerTransactionUsd; equal passes; null = no cap', () => {
    const p = { maxPerTransactionUsd: 100, requireMandateOverUsd: null };
    expect(evaluatePolicy(input(p, { total: '100.01' })).reasonCodes).toEqual(['OVER_PER_TX_CAP']);
    expect(evaluatePolicy(input(p, { total: '100.00' })).decision).toBe('accept');
    expect(evaluatePolicy(input({ maxPerTransactionUsd: null, requireMandateOverUsd: null }, { total: '999999999999.99' })).decision).toBe('accept');
  });

  it('OVER_DAILY_CAP: daySpend + total > maxPerAgentPerDayUsd; equal passes', () => {
    const p = { maxPerAgentPerDayUsd: 50 };
    expect(evaluatePolicy(input(p, { velocity: { lastHour: 0, lastDay: 3, daySpend: '40.01' } })).reasonCodes).toEqual(['OVER_DAILY_CAP']);
    const at = evaluatePolicy(input(p, { velocity: { lastHour: 0, lastDay: 3, daySpend: '40.00' } }));
    expect(at.decision).toBe('accept');
    expect(at.signals.projectedDaySpend).toBe('50.00');
  });

  it('RATE_LIMITED_HOURLY: lastHour >= ratePerAgentPerHour (the current session excluded)', () => {
    expect(evaluatePolicy(input({ ratePerAgentPerHour: 5 }, { velocity: { lastHour: 5, lastDay: 5, daySpend: '0' } })).reasonCodes).toEqual([
      'RATE_LIMITED_HOURLY',
    ]);
    expect(evaluatePolicy(input({ ratePerAgentPerHour: 5 }, { velocity: { lastHour: 4, lastDay: 4, daySpend: '0' } })).decision).toBe('accept');
  });

  it('RATE_LIMITED_DAILY: lastDay >= ratePerAgentPerDay', () => {
    expect(evaluatePolicy(input({ ratePerAgentPerDay: 20 }, { velocity: { lastHour: 0, lastDay: 20, daySpend: '0' } })).reasonCodes).toEqual([
      'RATE_LIMITED_DAILY',
    ]);
    expect(evaluatePolicy(input({ ratePerAgentPerDay: 20 }, { velocity: { lastHour: 0, lastDay: 19, daySpend: '0' } })).decision).toBe('accept');
  });

  it('INTENT_FORBIDDEN_KEYWORD: the buyer or mandate intent contains a keyword, case-insensitively', () => {
    const p = { forbiddenIntentKeywords: ['Gift Card', 'firearm'] };
    expect(evaluatePolicy(input(p, { intent: 'Buy a GIFT-CARD for Bob' })).reasonCodes).toEqual(['INTENT_FORBIDDEN_KEYWORD']);
    expect(evaluatePolicy(input(p, { intent: 'firearms accessories' })).reasonCodes).toEqual(['INTENT_FORBIDDEN_KEYWORD']);
    expect(evaluatePolicy(input(p, { intent: 'coffee beans' })).decision).toBe('accept');
    expect(evaluatePolicy(input(p, { intent: null })).decision).toBe('accept');
    const viaMandate = evaluatePolicy(input(p, { mandate: { ...SVC_OK, intent: 'gift card top-up' } }));
    expect(viaMandate.reasonCodes).toEqual(['INTENT_FORBIDDEN_KEYWORD']);
    expect(viaMandate.signals.forbiddenKeyword).toBe('gift card');
    expect(evaluatePolicy(input({ forbiddenIntentKeywords: ['', '  '] }, { intent: 'anything' })).decision).toBe('accept');
  });

  it('INTENT_MISMATCH: requiredIntentMatch and the buyer intent neither equals nor contains the mandate intent', () => {
    const p = { requiredIntentMatch: true };
    expect(evaluatePolicy(input(p, { mandate: SVC_OK, intent: 'Coffee Beans' })).decision).toBe('accept');
    expect(evaluatePolicy(input(p, { mandate: SVC_OK, intent: 'two bags of coffee  beans, please' })).decision).toBe('accept');
    expect(evaluatePolicy(input(p, { mandate: SVC_OK, intent: 'tea leaves' })).reasonCodes).toEqual(['INTENT_MISMATCH']);
    expect(evaluatePolicy(input(p, { mandate: SVC_OK, intent: 'coffee' })).reasonCodes).toEqual(['INTENT_MISMATCH']);
    expect(evaluatePolicy(input(p, { mandate: SVC_OK, intent: null })).reasonCodes).toEqual(['INTENT_MISMATCH']);
    expect(evaluatePolicy(input(p, { mandate: { ...SVC_OK, intent: null }, intent: 'coffee beans' })).reasonCodes).toEqual(['INTENT_MISMATCH']);
    expect(evaluatePolicy(input(p, { intent: 'coffee beans' })).reasonCodes).toEqual(['INTENT_MISMATCH']);
    expect(evaluatePolicy(input({ requiredIntentMatch: false }, { intent: 'tea' })).decision).toBe('accept');
  });

  it('HOLD_FOR_REVIEW: tier strictly below holdForReviewBelowTier; null = never hold', () => {
    const unknown = { reputation: { score: 500, tier: 'standard' as const, known: false } };
    expect(evaluatePolicy(input({ holdForReviewBelowTier: 'standard' }, unknown))).toMatchObject({
      decision: 'hold',
      tier: 'cautious',
      reasonCodes: ['HOLD_FOR_REVIEW'],
    });
    expect(evaluatePolicy(input({ holdForReviewBelowTier: 'standard' })).decision).toBe('accept');
    expect(evaluatePolicy(input({ holdForReviewBelowTier: 'premium' })).reasonCodes).toEqual(['HOLD_FOR_REVIEW']);
    expect(evaluatePolicy(input({ holdForReviewBelowTier: 'premium' }, { mandate: SVC_OK })).decision).toBe('accept');
    expect(evaluatePolicy(input({ holdForReviewBelowTier: 'trusted' }, { mandate: { type: 'acp', present: true, ok: true, ref: 'x' } })).decision).toBe(
      'accept',
    );
    expect(evaluatePolicy(input({ holdForReviewBelowTier: null }, unknown)).decision).toBe('accept');
  });
});

describe('evaluatePolicy combination', () => {
  it('GIVEN several failing reject rules THEN reject listing every code in rule order, and reject beats hold', () => {
    const v = evaluatePolicy(
      input(
        {
          blockedAgents: [AGENT],
          allowedRails: ['mock'],
          requireMandateOverUsd: 1,
          minReputationTier: 'elite',
          maxPerTransactionUsd: 5,
          maxPerAgentPerDayUsd: 5,
          ratePerAgentPerHour: 1,
          ratePerAgentPerDay: 1,
          forbiddenIntentKeywords: ['beans'],
          requiredIntentMatch: true,
          holdForReviewBelowTier: 'premium',
        },
        { intent: 'beans', velocity: { lastHour: 1, lastDay: 1, daySpend: '1.00' } },
      ),
    );
    expect(v.decision).toBe('reject');
    expect(v.reasonCodes).toEqual([
      'AGENT_BLOCKED',
      'RAIL_NOT_ALLOWED',
      'MANDATE_REQUIRED',
      'REPUTATION_TOO_LOW',
      'OVER_PER_TX_CAP',
      'OVER_DAILY_CAP',
      'RATE_LIMITED_HOURLY',
      'RATE_LIMITED_DAILY',
      'INTENT_FORBIDDEN_KEYWORD',
      'INTENT_MISMATCH',
    ]);
  });

  it('reports the numbers it used in signals', () => {
    const v = evaluatePolicy(
      input({ maxPerAgentPerDayUsd: 100.5, ratePerAgentPerHour: 9 }, { mandate: SVC_OK, velocity: { lastHour: 2, lastDay: 3, daySpend: '7.25' } }),
    );
    expect(v.signals).toMatchObject({
      total: '10.00',
      currency: 'USD',
      rail: 'x402',
      tier: 'premium',
      mandateType: 'svc',
      reputationScore: 500,
      reputationTier: 'standard',
      lastHour: 2,
      lastDay: 3,
      daySpend: '7.25',
      projectedDaySpend: '17.25',
      requireMandateOverUsd: '20',
      maxPerTransactionUsd: '500',
      maxPerAgentPerDayUsd: '100.5',
      ratePerAgentPerHour: 9,
      ratePerAgentPerDay: null,
    });
  });

  it('normalizes intents by case, punctuation and spacing', () => {
    expect(normalizeIntent('  Buy the COFFEE-beans!! ')).toBe('buy the coffee beans');
  });
});
