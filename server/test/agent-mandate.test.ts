import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { MandateIssuer, openSession, ordersOf, payX402, poll, verifyReceipt } from './helpers/agent-protocol.js';
import { TestApp } from './helpers/harness.js';
import { DomainProofWorld, verifyDomainByTxt } from './helpers/domain-proof.js';

let app: TestApp;
let issuer: MandateIssuer;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  issuer = await MandateIssuer.start();
  // Carts over 5 USD need a mandate; 2 coffees are 9.00.
  shop = await publishedMerchant(app, {
    merchant: { trusted_svc_jwks_url: issuer.url },
    policy: { requireMandateOverUsd: 5, holdForReviewBelowTier: 'standard' },
  });
});
afterAll(async () => {
  await app?.stop();
  await issuer?.stop();
});

const nowSec = () => Math.floor(Date.now() / 1000);

function claimsFor(agent: string, over: { authorization?: Record<string, unknown> } & Record<string, unknown> = {}) {
  const { authorization, ...rest } = over;
  return {
    iss: 'https://wallet.example',
    sub: `mnd_${ulid().toLowerCase()}`,
    exp: nowSec() + 600,
    decision: 'approve',
    agent_id: agent,
    authorization: { merchant: shop.merchant.id, max_amount: '20.00', currency: 'USD', intent: 'coffee for the office', ...authorization },
    ...rest,
  };
}

/** Opens a 9.00 cart carrying `mandate` for `agent` and settles it. */
async function buyWith(agent: string, mandate: Record<string, unknown>) {
  const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent, mandate });
  const { res } = await payX402(app, shop.base, s, newBuyer());
  return { s, res };
}

function expectRejected(res: { status: number; body: any; text: string }, code: string) {
  expect(res.status, res.text).toBe(403);
  expect(res.body).toEqual({ status: 'rejected', reason_codes: [code], error_human: expect.any(String) });
}

describe('svc mandates', () => {
  it('GIVEN a valid svc mandate over requireMandateOverUsd WHEN the agent settles THEN 200, the order is premium and the receipt names the mandate', async () => {
    const agent = agentId();
    const claims = claimsFor(agent);
    const { s, res } = await buyWith(agent, { type: 'svc', token: await issuer.sign(claims) });
    expect(res.status, res.text).toBe(200);
    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ decision: 'accept', trust_tier: 'premium', mandate_type: 'svc', mandate_ref: claims.sub });
    const { claims: receipt } = await verifyReceipt(app, shop.base, res.body.receipt);
    expect(receipt).toMatchObject({ mandateType: 'svc', mandateRef: claims.sub });
    expect((await poll(app, shop.base, s.id)).body.verdict).toMatchObject({ decision: 'accept', tier: 'premium' });
    const feed = await app.request('GET', `/v1/orders?merchant_id=${shop.merchant.id}`, { key: shop.key });
    expect(feed.body.data.find((o: any) => o.session_id === s.id)).toMatchObject({ mandate_type: 'svc', trust_tier: 'premium' });
  });

  it("GIVEN a mandate naming the merchant's domain WHEN the agent settles THEN it binds once the merchant has verified that domain, and not before (anyone can claim a domain)", async () => {
    const byDomain = async () => {
      const agent = agentId();
      return (await buyWith(agent, { type: 'svc', token: await issuer.sign(claimsFor(agent, { authorization: { merchant: shop.merchant.domain } })) })).res;
    };
    const unverified = await byDomain();
    expectRejected(unverified, 'MANDATE_MERCHANT_MISMATCH');
    expect(unverified.body.error_human).toContain('its domain is not verified');

    const world = await DomainProofWorld.start();
    world.install(app);
    await verifyDomainByTxt(app, world, shop.key, shop.merchant.id).finally(() => world.close());
    const verified = await byDomain();
    expect(verified.status, verified.text).toBe(200);
  });

  it('GIVEN a mandate already spent WHEN it is presented on a second session THEN 403 MANDATE_REPLAY', async () => {
    const agent = agentId();
    const token = await issuer.sign(claimsFor(agent));
    expect((await buyWith(agent, { type: 'svc', token })).res.status).toBe(200);
    const second = await buyWith(agent, { type: 'svc', token });
    expectRejected(second.res, 'MANDATE_REPLAY');
    expect((await ordersOf(app, second.s.id))[0]).toMatchObject({ decision: 'reject', mandate_type: 'svc' });
    // 500 + 10 for the purchase - 25 for the replay attempt.
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key: shop.key })).body.score).toBe(485);
  });

  it('GIVEN one mandate WHEN two sessions settle with it at the same moment THEN one is accepted and the other is MANDATE_REPLAY', async () => {
    const agent = agentId();
    const token = await issuer.sign(claimsFor(agent));
    const results = await Promise.all([1, 2].map(async () => (await buyWith(agent, { type: 'svc', token })).res));
    expect(results.map((r) => r.status).sort()).toEqual([200, 403]);
    expectRejected(results.find((r) => r.status === 403)!, 'MANDATE_REPLAY');
  });

  it('GIVEN mandates that do not bind WHEN the agent settles THEN 403 with the binding code', async () => {
    const agent = agentId();
    const other = await MandateIssuer.start();
    try {
      const cases: Array<[string, Record<string, unknown>]> = [
        ['MANDATE_EXPIRED', { type: 'svc', token: await issuer.sign(claimsFor(agent, { exp: nowSec() - 60 })) }],
        ['MANDATE_MERCHANT_MISMATCH', { type: 'svc', token: await issuer.sign(claimsFor(agent, { authorization: { merchant: `mrch_${ulid().toLowerCase()}` } })) }],
        ['MANDATE_NOT_APPROVED', { type: 'svc', token: await issuer.sign(claimsFor(agent, { decision: 'decline' })) }],
        ['MANDATE_AMOUNT_INSUFFICIENT', { type: 'svc', token: await issuer.sign(claimsFor(agent, { authorization: { max_amount: '8.99' } })) }],
        ['MANDATE_AGENT_MISMATCH', { type: 'svc', token: await issuer.sign(claimsFor(agentId())) }],
        ['MANDATE_INVALID_SIGNATURE', { type: 'svc', token: await other.sign(claimsFor(agent)) }],
        ['MANDATE_MALFORMED', { type: 'svc', token: 'not.a.jws' }],
        ['MANDATE_MALFORMED', { type: 'svc' }],
        ['MANDATE_MALFORMED', { type: 'ap2', raw: { anything: true } }],
        ['MANDATE_TYPE_UNSUPPORTED', { type: 'acp', token: 'x' }],
      ];
      for (const [code, mandate] of cases) {
        const { s, res } = await buyWith(agent, mandate);
        expectRejected(res, code);
        expect((await poll(app, shop.base, s.id)).body.state).toBe('rejected');
      }
    } finally {
      await other.stop();
    }
  });

  it('GIVEN a mandate that failed to bind WHEN its subject is reused in a valid mandate THEN it is not a replay (nothing was reserved)', async () => {
    const agent = agentId();
    const sub = `mnd_${ulid().toLowerCase()}`;
    const expired = await issuer.sign(claimsFor(agent, { sub, exp: nowSec() - 1 }));
    expectRejected((await buyWith(agent, { type: 'svc', token: expired })).res, 'MANDATE_EXPIRED');
    const fresh = await issuer.sign(claimsFor(agent, { sub }));
    expect((await buyWith(agent, { type: 'svc', token: fresh })).res.status).toBe(200);
  });

  it("GIVEN an issuer whose JWKS cannot be fetched WHEN the agent settles THEN 403 MANDATE_ISSUER_UNAVAILABLE without closing the session, and it settles once the keys are reachable", async () => {
    const gone = await MandateIssuer.start();
    const deadUrl = gone.url;
    await gone.stop();
    const m = await publishedMerchant(app, { merchant: { trusted_svc_jwks_url: deadUrl }, policy: { requireMandateOverUsd: 5, holdForReviewBelowTier: null } });
    const agent = agentId();
    const token = await issuer.sign(claimsFor(agent, { authorization: { merchant: m.merchant.id } }));
    const s = await openSession(app, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent, mandate: { type: 'svc', token } });
    const buyer = newBuyer();
    expectRejected((await payX402(app, m.base, s, buyer)).res, 'MANDATE_ISSUER_UNAVAILABLE');
    expect((await poll(app, m.base, s.id)).body.state).toBe('awaiting_payment');
    expect(await ordersOf(app, s.id)).toHaveLength(0);

    const fixed = await app.request('PATCH', `/v1/merchants/${m.merchant.id}`, { key: m.key, body: { trusted_svc_jwks_url: issuer.url } });
    expect(fixed.status).toBe(200);
    const { res } = await payX402(app, m.base, s, buyer);
    expect(res.status, res.text).toBe(200);
  });

  it('GIVEN no mandate WHEN the cart is over the threshold THEN MANDATE_REQUIRED; a none mandate is the same', async () => {
    expectRejected((await buyWith(agentId(), { type: 'none' })).res, 'MANDATE_REQUIRED');
  });
});
