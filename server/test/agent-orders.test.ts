import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, publishedMerchant, signPayment, newBuyer } from './helpers/agent.js';
import { openSession, ordersOf, poll, settle } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let shopA: Awaited<ReturnType<typeof publishedMerchant>>;
let shopB: Awaited<ReturnType<typeof publishedMerchant>>;
/** Order ids per merchant, in creation order. */
const placed: Record<string, string[]> = {};

beforeAll(async () => {
  app = await TestApp.start();
  const policy = { holdForReviewBelowTier: null, requireMandateOverUsd: null };
  shopA = await publishedMerchant(app, { policy });
  // A second merchant of the same project.
  shopB = await publishedMerchant(app, { key: shopA.key, policy });
  for (const [shop, n] of [[shopA, 52], [shopB, 3]] as const) {
    placed[shop.merchant.id] = [];
    for (let i = 0; i < n; i++) {
      const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
      const res = await settle(app, shop.base, s.id, { payment: { mock: true } });
      if (res.status !== 200) throw new Error(`settle: ${res.status} ${res.text}`);
      placed[shop.merchant.id]!.push(res.body.order_id);
    }
  }
});
afterAll(async () => app?.stop());

describe('order feed', () => {
  it('GIVEN 55 orders in a project WHEN the feed is read THEN it is newest first with 50 by default, and the cursor walks the rest without gaps or repeats', async () => {
    const all = [...placed[shopA.merchant.id]!, ...placed[shopB.merchant.id]!].reverse();
    const first = await app.request('GET', '/v1/orders', { key: shopA.key });
    expect(first.status, first.text).toBe(200);
    expect(first.body.data).toHaveLength(50);
    expect(first.body.has_more).toBe(true);
    expect(first.body.next_cursor).toBe(first.body.data[49].id);
    expect(first.body.data.map((o: any) => o.id)).toEqual(all.slice(0, 50));
    expect(first.body.data[0]).toEqual({
      id: all[0],
      source: 'hosted',
      session_id: expect.stringMatching(/^sess_/),
      merchant_id: shopB.merchant.id,
      agent_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      decision: 'accept',
      total: { currency: 'USD', subtotal: '4.50', tax: '0.00', total: '4.50' },
      rail_name: 'mock',
      settlement_ref: expect.stringMatching(/^mock_/),
      receipt_id: expect.stringMatching(/^rcpt_/),
      mandate_type: 'none',
      trust_tier: 'cautious',
      amount_refunded: '0.00',
      refund_status: 'none',
      livemode: false,
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/),
    });

    const walked: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await app.request('GET', `/v1/orders?limit=7${cursor ? `&cursor=${cursor}` : ''}`, { key: shopA.key });
      expect(page.status).toBe(200);
      expect(page.body.data.length).toBeLessThanOrEqual(7);
      walked.push(...page.body.data.map((o: any) => o.id));
      cursor = page.body.next_cursor;
      expect(page.body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(walked).toEqual(all);

    const last = await app.request('GET', `/v1/orders?limit=100`, { key: shopA.key });
    expect(last.body.data).toHaveLength(55);
    expect(last.body).toMatchObject({ has_more: false, next_cursor: null });
  });

  it('GIVEN limits outside 1..100 or a foreign cursor WHEN the feed is read THEN 400 VALIDATION_FAILED', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'cursor=mrch_01', 'surprise=1']) {
      expectError(await app.request('GET', `/v1/orders?${q}`, { key: shopA.key }), 400, 'VALIDATION_FAILED');
    }
  });

  it('GIVEN two merchants WHEN the feed is filtered by merchant_id THEN only that merchant\'s orders appear; a merchant of another project is 404', async () => {
    const b = await app.request('GET', `/v1/orders?merchant_id=${shopB.merchant.id}`, { key: shopA.key });
    expect(b.body.data.map((o: any) => o.id)).toEqual([...placed[shopB.merchant.id]!].reverse());
    expect(b.body.has_more).toBe(false);
    const a = await app.request('GET', `/v1/orders?merchant_id=${shopA.merchant.id}&limit=100`, { key: shopA.key });
    expect(a.body.data).toHaveLength(52);
    expect(a.body.data.every((o: any) => o.merchant_id === shopA.merchant.id)).toBe(true);

    const stranger = await app.key('test');
    expectError(await app.request('GET', `/v1/orders?merchant_id=${shopA.merchant.id}`, { key: stranger }), 404, 'NOT_FOUND');
  });

  it('GIVEN test orders WHEN a live key of the same project or a key of another project reads the feed THEN it sees none of them', async () => {
    const live: TestKey = await app.key('live', { projectId: shopA.key.projectId });
    const liveFeed = await app.request('GET', '/v1/orders', { key: live });
    expect(liveFeed.status).toBe(200);
    expect(liveFeed.body).toEqual({ data: [], has_more: false, next_cursor: null });
    expectError(await app.request('GET', `/v1/orders?merchant_id=${shopA.merchant.id}`, { key: live }), 404, 'NOT_FOUND');

    const stranger = await app.key('test');
    expect((await app.request('GET', '/v1/orders', { key: stranger })).body).toEqual({ data: [], has_more: false, next_cursor: null });

    const noScope = await app.key('test', { projectId: shopA.key.projectId, scopes: ['products:read'] });
    expectError(await app.request('GET', '/v1/orders', { key: noScope }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('GET', '/v1/orders'), 401, 'UNAUTHENTICATED');
  });
});

describe('live mode settle', () => {
  it('GIVEN a published live merchant WHEN an agent settles over x402 THEN 503 FACILITATOR_UNAVAILABLE, nothing reaches the mock and no order is written', async () => {
    const live: TestKey = await app.key('live', { projectId: shopA.key.projectId });
    const shop = await publishedMerchant(app, {
      key: live,
      merchant: { receiving: { x402: { chain: 'base', address: '0x2222222222222222222222222222222222222222' } }, rails: ['x402'] },
      policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null },
    });
    const manifest = await app.request('GET', `${shop.base}/.well-known/agentic-checkout.json`);
    expect(manifest.body).toMatchObject({ livemode: true, rails: ['x402'] });

    expectError(await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }], rail: 'mock' } }), 422, 'RAIL_NOT_ALLOWED');
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    expect(s.created.body.livemode).toBe(true);
    expect(s.pr).toMatchObject({
      chain: 'base',
      chainId: 8453,
      verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      eip712Domain: { name: 'USD Coin', version: '2' },
      amountBaseUnits: '4500000',
    });

    const payment = await signPayment(newBuyer(), s.pr);
    expectError(await settle(app, shop.base, s.id, payment), 503, 'FACILITATOR_UNAVAILABLE');
    // The mock payment is refused too: a live x402 session never falls through to the mock.
    const mock = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(mock.status).toBe(402);
    expect(mock.body.reason_codes).toEqual(['PAYMENT_SCHEME_UNSUPPORTED']);

    expect(await ordersOf(app, s.id)).toHaveLength(0);
    expect(await sql(app, 'select 1 from payment_nonces where session_id = ?', [s.id])).toHaveLength(0);
    expect((await poll(app, shop.base, s.id)).body.state).toBe('awaiting_payment');
    expect((await app.request('GET', '/v1/orders', { key: live })).body.data).toEqual([]);
  });
});
