import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { eventTypes, openSession, ordersOf, payX402, poll, settle } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

/** Policies here never hold and never need a mandate unless the test says so. */
const shopWith = (policy: Record<string, unknown>) =>
  publishedMerchant(app, {
    policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, ...policy },
    products: [
      { sku: 'coffee', amount: '4.50' },
      { sku: 'dollar', amount: '1.00' },
    ],
  });

/** THEN-helper for a gate rejection: 403 {status: rejected, reason_codes, error_human}. */
function expectRejected(res: { status: number; body: any; text: string }, codes: string[]) {
  expect(res.status, res.text).toBe(403);
  expect(Object.keys(res.body).sort()).toEqual(['error_human', 'reason_codes', 'status']);
  expect(res.body.status).toBe('rejected');
  expect(res.body.reason_codes).toEqual(codes);
  expect(res.body.error_human.length).toBeGreaterThan(0);
}

/** Settles one cart for `agent` with a fresh buyer signature. */
async function buy(base: string, agent: string, items: Array<{ sku: string; qty: number }>, extra: Record<string, unknown> = {}) {
  const s = await openSession(app, base, items, { agent_id: agent, ...extra });
  const { res } = await payX402(app, base, s, newBuyer());
  return { s, res };
}

/** `buy` with the service clock at `at` (the session and the authorization's window on that clock). */
async function buyAt(at: Date, base: string, agent: string) {
  const realNow = app.services.now;
  app.services.now = () => at;
  try {
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
    const sec = Math.floor(at.getTime() / 1000);
    return (await payX402(app, base, s, newBuyer(), { validAfter: sec - 600, validBefore: sec + 300 })).res;
  } finally {
    app.services.now = realNow;
  }
}
const MINUTE = 60_000;

describe('policy rejections through HTTP (403)', () => {
  it('GIVEN maxPerTransactionUsd WHEN a cart is over it THEN OVER_PER_TX_CAP, recorded as a rejected order with an order.rejected event; at the cap it is accepted', async () => {
    const { key, base } = await shopWith({ maxPerTransactionUsd: 9 });
    const agent = agentId();
    const { s, res } = await buy(base, agent, [{ sku: 'coffee', qty: 3 }]);
    expectRejected(res, ['OVER_PER_TX_CAP']);

    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ decision: 'reject', trust_tier: 'cautious', mandate_type: 'none', settlement_ref: null });
    expect(await eventTypes(app, s.id)).toEqual(['order.rejected']);
    const ev = await sql<{ payload: any }>(app, "select payload from events where type = 'order.rejected' and payload->'data'->'object'->>'session_id' = ?", [s.id]);
    expect(ev[0]!.payload.data.object).toMatchObject({ id: order!.id, session_id: s.id, agent_id: agent, trust_tier: 'cautious' });
    expect(ev[0]!.payload.data.object.receipt_id).toBeUndefined();
    expect(ev[0]!.payload.data.object.settlement_ref).toBeUndefined();

    const view = await poll(app, base, s.id);
    expect(view.body).toMatchObject({ state: 'rejected', orderId: order!.id, receipt: null, verdict: { decision: 'reject', reasonCodes: ['OVER_PER_TX_CAP'] } });
    // Nothing was captured, so the authorization's nonce is not held.
    expect(await sql(app, 'select 1 from payment_nonces where session_id = ?', [s.id])).toHaveLength(0);
    // A rejection costs the agent 15.
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body.score).toBe(485);

    const atCap = await buy(base, agentId(), [{ sku: 'coffee', qty: 2 }]);
    expect(atCap.s.created.body.total.total).toBe('9.00');
    expect(atCap.res.status, atCap.res.text).toBe(200);
  });

  it('GIVEN blockedAgents WHEN a listed agent pays THEN AGENT_BLOCKED, whatever the case of the id', async () => {
    const agent = agentId();
    const { base } = await shopWith({ blockedAgents: [agent.toUpperCase()] });
    expectRejected((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['AGENT_BLOCKED']);
    expect((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }])).res.status).toBe(200);
  });

  it('GIVEN requireMandateOverUsd WHEN a cart over it has no mandate THEN MANDATE_REQUIRED; under it is accepted', async () => {
    const { base } = await shopWith({ requireMandateOverUsd: 5 });
    expectRejected((await buy(base, agentId(), [{ sku: 'coffee', qty: 2 }])).res, ['MANDATE_REQUIRED']);
    expect((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }])).res.status).toBe(200);
  });

  it('GIVEN forbiddenIntentKeywords WHEN the buyer_intent contains one THEN INTENT_FORBIDDEN_KEYWORD', async () => {
    const { base } = await shopWith({ forbiddenIntentKeywords: ['gift card'] });
    expectRejected((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }], { buyer_intent: 'Buy GIFT-CARDS... er, a gift  card!' })).res, ['INTENT_FORBIDDEN_KEYWORD']);
    expect((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }], { buyer_intent: 'morning coffee' })).res.status).toBe(200);
  });

  it('GIVEN ratePerAgentPerHour 1 WHEN the agent buys a second time THEN RATE_LIMITED_HOURLY; another agent is unaffected', async () => {
    const { base } = await shopWith({ ratePerAgentPerHour: 1 });
    const agent = agentId();
    expect((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res.status).toBe(200);
    expectRejected((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['RATE_LIMITED_HOURLY']);
    expect((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }])).res.status).toBe(200);
  });

  it('GIVEN ratePerAgentPerHour 1 WHEN one agent settles five sessions at once THEN exactly one is accepted', async () => {
    const { base } = await shopWith({ ratePerAgentPerHour: 1 });
    const agent = agentId();
    const sessions = await Promise.all(Array.from({ length: 5 }, () => openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent })));
    const results = await Promise.all(sessions.map(async (s) => (await payX402(app, base, s, newBuyer())).res));
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 200)) expectRejected(r, ['RATE_LIMITED_HOURLY']);
  });

  it('GIVEN maxPerAgentPerDayUsd WHEN one agent settles several carts at once THEN the accepted ones stay within the cap', async () => {
    const { base } = await shopWith({ maxPerAgentPerDayUsd: 10 });
    const agent = agentId();
    const sessions = await Promise.all(Array.from({ length: 4 }, () => openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent })));
    const results = await Promise.all(sessions.map(async (s) => (await payX402(app, base, s, newBuyer())).res));
    // 4.50 each: two fit under 10.00, the third would make 13.50.
    expect(results.filter((r) => r.status === 200)).toHaveLength(2);
    for (const r of results.filter((x) => x.status !== 200)) expectRejected(r, ['OVER_DAILY_CAP']);
  });

  it('GIVEN ratePerAgentPerDay 1 WHEN the agent buys a second time THEN RATE_LIMITED_DAILY', async () => {
    const { base } = await shopWith({ ratePerAgentPerDay: 1 });
    const agent = agentId();
    expect((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res.status).toBe(200);
    expectRejected((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['RATE_LIMITED_DAILY']);
  });

  it('GIVEN maxPerAgentPerDayUsd WHEN the second purchase takes the day over it THEN OVER_DAILY_CAP; rejected sessions do not count', async () => {
    const { base } = await shopWith({ maxPerAgentPerDayUsd: 10 });
    const agent = agentId();
    expect((await buy(base, agent, [{ sku: 'coffee', qty: 2 }])).res.status).toBe(200);
    expectRejected((await buy(base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['OVER_DAILY_CAP']);
    // 9.00 spent and a rejected 4.50 that does not count: 1.00 more fits exactly.
    expect((await buy(base, agent, [{ sku: 'dollar', qty: 1 }])).res.status).toBe(200);
  });

  it("GIVEN minReputationTier trusted WHEN a new agent (neutral, standard) pays THEN REPUTATION_TOO_LOW", async () => {
    const { base } = await shopWith({ minReputationTier: 'trusted' });
    expectRejected((await buy(base, agentId(), [{ sku: 'coffee', qty: 1 }])).res, ['REPUTATION_TOO_LOW']);
  });

  it('GIVEN several failing rules WHEN the gate runs THEN every code is listed', async () => {
    const agent = agentId();
    const { base } = await shopWith({ blockedAgents: [agent], maxPerTransactionUsd: 1, minReputationTier: 'elite' });
    const { res } = await buy(base, agent, [{ sku: 'coffee', qty: 1 }]);
    expect(res.status).toBe(403);
    expect([...res.body.reason_codes].sort()).toEqual(['AGENT_BLOCKED', 'OVER_PER_TX_CAP', 'REPUTATION_TOO_LOW']);
  });

  it('GIVEN a session on the mock rail WHEN the merchant publishes allowedRails [x402] before it settles THEN the gate rejects RAIL_NOT_ALLOWED', async () => {
    const { key, merchant, base } = await shopWith({});
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    await app.request('PUT', `/v1/policy?merchant_id=${merchant.id}`, { key, body: { body: { allowedRails: ['x402'], holdForReviewBelowTier: null } } });
    expect((await app.request('POST', `/v1/publish?merchant_id=${merchant.id}`, { key })).status).toBe(200);
    expectRejected(await settle(app, base, s.id, { payment: { mock: true } }), ['RAIL_NOT_ALLOWED']);
  });
});

describe('the velocity windows: what counts and for how long', () => {
  it('GIVEN ratePerAgentPerHour 1 WHEN the agent bought 61 minutes ago THEN it buys again, and a minute later it is RATE_LIMITED_HOURLY', async () => {
    const { base } = await shopWith({ ratePerAgentPerHour: 1 });
    const agent = agentId();
    const t = Math.floor(Date.now() / 1000) * 1000;
    expect((await buyAt(new Date(t - 61 * MINUTE), base, agent)).status).toBe(200);
    const again = await buyAt(new Date(t), base, agent);
    expect(again.status, again.text).toBe(200);
    expectRejected(await buyAt(new Date(t + MINUTE), base, agent), ['RATE_LIMITED_HOURLY']);
  });

  it('GIVEN ratePerAgentPerDay 1 and maxPerAgentPerDayUsd 5 WHEN the agent bought 25 hours ago THEN it buys again, and an hour later the day is spent', async () => {
    const { base } = await shopWith({ ratePerAgentPerDay: 1, maxPerAgentPerDayUsd: 5 });
    const agent = agentId();
    const t = Math.floor(Date.now() / 1000) * 1000;
    expect((await buyAt(new Date(t - 25 * 60 * MINUTE), base, agent)).status).toBe(200);
    const again = await buyAt(new Date(t), base, agent);
    expect(again.status, again.text).toBe(200);
    expectRejected(await buyAt(new Date(t + 60 * MINUTE), base, agent), ['OVER_DAILY_CAP', 'RATE_LIMITED_DAILY']);
  });

  it('GIVEN ratePerAgentPerHour 1 and new agents held WHEN the first order is held, and then approved awaiting a fresh authorization THEN the next sessions are RATE_LIMITED_HOURLY: in-flight orders count', async () => {
    const shop = await shopWith({ ratePerAgentPerHour: 1, holdForReviewBelowTier: 'standard' });
    const agent = agentId();
    const first = await buy(shop.base, agent, [{ sku: 'coffee', qty: 1 }]);
    expect(first.res.status, first.res.text).toBe(202);
    expectRejected((await buy(shop.base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['RATE_LIMITED_HOURLY']);

    // approved after the authorization expired: the session waits for a fresh one (state approved)
    const realNow = app.services.now;
    const later = new Date(Date.now() + 400_000);
    app.services.now = () => later;
    try {
      const approved = await app.request('POST', `/v1/sessions/${first.s.id}/approve`, { key: shop.key });
      expect(approved.status, approved.text).toBe(202);
    } finally {
      app.services.now = realNow;
    }
    expect((await poll(app, shop.base, first.s.id)).body.state).toBe('approved');
    expectRejected((await buy(shop.base, agent, [{ sku: 'coffee', qty: 1 }])).res, ['RATE_LIMITED_HOURLY']);
  });
});
