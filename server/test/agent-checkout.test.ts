import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { agentId, newBuyer, publishedMerchant, USDC_SEPOLIA } from './helpers/agent.js';
import { openSession, payX402, poll } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { TEST_PAY_TO, TestApp } from './helpers/harness.js';

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, {
    policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null },
    products: [
      { sku: 'dime', amount: '0.10' },
      { sku: 'odd', amount: '1.005' },
      { sku: 'tiny', amount: '0.0000001' },
      { sku: 'coffee', amount: '4.50' },
      { sku: 'gone', amount: '2.00', available: false },
    ],
  });
});
afterAll(async () => app?.stop());

const create = (body: Record<string, unknown>, base = shop.base) => app.request('POST', `${base}/agent/checkout`, { body });

describe('checkout totals and the payment requirement', () => {
  it('GIVEN USD items WHEN a cart is opened THEN totals are exact decimals and the requirement is the base-sepolia USDC one', async () => {
    const res = await create({ agent_id: agentId(), items: [{ sku: 'dime', qty: 3 }] });
    expect(res.status, res.text).toBe(201);
    expect(res.body.session_id).toMatch(/^sess_[0-9a-z]{26}$/);
    expect(res.body.state).toBe('awaiting_payment');
    expect(res.body.livemode).toBe(false);
    expect(res.body.total).toEqual({ currency: 'USD', subtotal: '0.30', tax: '0.00', total: '0.30' });
    expect(res.body.payment_required).toEqual({
      rail: 'x402',
      scheme: 'x402-exact',
      payTo: TEST_PAY_TO,
      amount: '0.30',
      currency: 'USD',
      amountBaseUnits: '300000',
      chain: 'base-sepolia',
      chainId: 84532,
      asset: 'USDC',
      verifyingContract: USDC_SEPOLIA,
      eip712Domain: { name: 'USDC', version: '2' },
      validUntil: res.body.expires_at,
    });
    expect(res.body.next.startsWith(`POST ${shop.base}/agent/checkout/${res.body.session_id}/settle {"payment":{"scheme":"x402-exact"`)).toBe(true);
    const view = await poll(app, shop.base, res.body.session_id);
    expect(res.body.expires_at - view.body.createdAt).toBe(900);
  });

  it('GIVEN a unit price with more places than the currency WHEN a cart is opened THEN the exact sum is kept', async () => {
    const one = await create({ agent_id: agentId(), items: [{ sku: 'odd', qty: 1 }] });
    expect(one.body.total).toEqual({ currency: 'USD', subtotal: '1.005', tax: '0.00', total: '1.005' });
    expect(one.body.payment_required).toMatchObject({ amount: '1.005', amountBaseUnits: '1005000' });

    const mixed = await create({ agent_id: agentId(), items: [{ sku: 'odd', qty: 3 }, { sku: 'dime', qty: 2 }] });
    expect(mixed.body.total.total).toBe('3.215');
    expect(mixed.body.payment_required).toMatchObject({ amount: '3.215', amountBaseUnits: '3215000' });
  });

  it('GIVEN a total below one base unit WHEN a cart is opened THEN amountBaseUnits rounds up to 1 and amount shows the rounded value, which then settles', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'tiny', qty: 1 }]);
    expect(s.created.body.total.total).toBe('0.0000001');
    expect(s.pr).toMatchObject({ amount: '0.000001', amountBaseUnits: '1' });
    const { res } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
  });
});

describe('checkout create errors', () => {
  it('GIVEN a malformed request WHEN a cart is opened THEN it is 400 VALIDATION_FAILED naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ agent_id: 'not-a-uuid', items: [{ sku: 'dime', qty: 1 }] }, 'body.agent_id'],
      [{ items: [{ sku: 'dime', qty: 1 }] }, 'body.agent_id'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 0 }] }, 'body.items.0.qty'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 1001 }] }, 'body.items.0.qty'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 1.5 }] }, 'body.items.0.qty'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }, { sku: 'dime', qty: 2 }] }, 'body.items'],
      [{ agent_id: agentId(), items: Array.from({ length: 101 }, (_, i) => ({ sku: `s${i}`, qty: 1 })) }, 'body.items'],
      [{ agent_id: agentId(), items: [] }, 'body.items'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }], rail: 'paypal' }, 'body.rail'],
      [{ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }], surprise: true }, 'surprise'],
    ];
    for (const [body, field] of cases) {
      const res = await create(body);
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, JSON.stringify(body).slice(0, 80)).toContain(field);
    }
    // A qty of 1000 and 100 lines are the inclusive limits.
    expect((await create({ agent_id: agentId(), items: [{ sku: 'dime', qty: 1000 }] })).status).toBe(201);
    const hundred = await create({ agent_id: agentId(), items: Array.from({ length: 100 }, (_, i) => ({ sku: `s${i}`, qty: 1 })) });
    expectError(hundred, 404, 'SKU_UNKNOWN');
  });

  it('GIVEN unknown or unavailable SKUs WHEN a cart is opened THEN 404 SKU_UNKNOWN or 422 SKU_UNAVAILABLE naming them', async () => {
    const unknown = await create({ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }, { sku: 'nope', qty: 1 }] });
    expectError(unknown, 404, 'SKU_UNKNOWN');
    expect(unknown.body.error_human).toContain('nope');
    const gone = await create({ agent_id: agentId(), items: [{ sku: 'gone', qty: 1 }] });
    expectError(gone, 422, 'SKU_UNAVAILABLE');
    expect(gone.body.error_human).toContain('gone');
  });

  it('GIVEN a rail the merchant does not offer or its policy forbids WHEN a cart asks for it THEN 422 RAIL_NOT_ALLOWED', async () => {
    expectError(await create({ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }], rail: 'card' }), 422, 'RAIL_NOT_ALLOWED');
    // The mock rail is offered here.
    const mock = await create({ agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }], rail: 'mock' });
    expect(mock.status).toBe(201);
    expect(mock.body.payment_required).toMatchObject({ rail: 'mock', scheme: 'mock', amountBaseUnits: null, chain: null });
    expect(mock.body.next).toBe(`POST ${shop.base}/agent/checkout/${mock.body.session_id}/settle {"payment":{"mock":true}}`);

    const strict = await publishedMerchant(app, { policy: { allowedRails: ['x402'] } });
    const refused = await app.request('POST', `${strict.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }], rail: 'mock' } });
    expectError(refused, 422, 'RAIL_NOT_ALLOWED');
    const chosen = await app.request('POST', `${strict.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } });
    expect(chosen.status).toBe(201);
    expect(chosen.body.payment_required.rail).toBe('x402');

    const mockOnly = await publishedMerchant(app, { policy: { allowedRails: ['mock'] } });
    const dflt = await app.request('POST', `${mockOnly.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } });
    expect(dflt.status).toBe(201);
    expect(dflt.body.payment_required.rail).toBe('mock');
  });

  it('GIVEN a EUR item added after publish WHEN a cart holds it THEN 422 CURRENCY_UNSUPPORTED, alone or mixed with USD', async () => {
    const m = await publishedMerchant(app);
    const add = await app.request('POST', `/v1/catalog?merchant_id=${m.merchant.id}`, {
      key: m.key,
      body: { sku: 'croissant', name: 'Croissant', price: { amount: '2.00', currency: 'EUR' } },
    });
    expect(add.status).toBe(201);
    const eur = await app.request('POST', `${m.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'croissant', qty: 1 }] } });
    expectError(eur, 422, 'CURRENCY_UNSUPPORTED');
    const mixed = await app.request('POST', `${m.base}/agent/checkout`, {
      body: { agent_id: agentId(), items: [{ sku: 'croissant', qty: 1 }, { sku: 'coffee', qty: 1 }] },
    });
    expectError(mixed, 422, 'CURRENCY_UNSUPPORTED');
    const mockEur = await app.request('POST', `${m.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'croissant', qty: 1 }], rail: 'mock' } });
    expectError(mockEur, 422, 'CURRENCY_UNSUPPORTED');
  });

  it('GIVEN an unknown merchant WHEN a cart is opened THEN 404 NOT_FOUND', async () => {
    const body = { agent_id: agentId(), items: [{ sku: 'dime', qty: 1 }] };
    expectError(await create(body, `/m/mrch_${ulid().toLowerCase()}`), 404, 'NOT_FOUND');
    expectError(await create(body, '/m/no-such-shop-anywhere'), 404, 'NOT_FOUND');
  });
});

describe('checkout idempotency', () => {
  it('GIVEN a create with an idempotency_key WHEN it is repeated THEN the same body replays byte for byte and a different body is 409', async () => {
    const agent = agentId();
    const body = { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }], idempotency_key: 'order-1' };
    const first = await create(body);
    expect(first.status).toBe(201);
    const again = await create(body);
    expect(again.status).toBe(201);
    expect(again.text).toBe(first.text);
    // Key order does not make it a different request.
    const reordered = await create({ idempotency_key: 'order-1', items: [{ qty: 1, sku: 'coffee' }], agent_id: agent });
    expect(reordered.text).toBe(first.text);
    const rows = await sql(app, 'select id from checkout_sessions where agent_id = ?', [agent]);
    expect(rows).toHaveLength(1);

    expectError(await create({ ...body, items: [{ sku: 'coffee', qty: 2 }] }), 409, 'IDEMPOTENCY_KEY_REUSED');
    // Keys are scoped to the agent.
    const other = await create({ ...body, agent_id: agentId() });
    expect(other.status).toBe(201);
    expect(other.body.session_id).not.toBe(first.body.session_id);
  });

  it('GIVEN concurrent creates with one idempotency_key WHEN they race THEN one session exists and every answer is its response', async () => {
    const agent = agentId();
    const body = { agent_id: agent, items: [{ sku: 'dime', qty: 2 }], idempotency_key: 'race' };
    const all = await Promise.all(Array.from({ length: 6 }, () => create(body)));
    for (const r of all) {
      expect(r.status, r.text).toBe(201);
      expect(r.text).toBe(all[0]!.text);
    }
    expect(await sql(app, 'select id from checkout_sessions where agent_id = ?', [agent])).toHaveLength(1);
  });
});

describe('session poll view', () => {
  it('GIVEN an open session WHEN it is polled THEN the view has lines, total, rail, the payment requirement and unix times; after settling it has the receipt instead', async () => {
    const agent = agentId();
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 2 }, { sku: 'dime', qty: 1 }], { agent_id: agent });
    const view = await poll(app, shop.base, s.id);
    expect(view.status).toBe(200);
    expect(view.body).toEqual({
      id: s.id,
      merchantId: shop.merchant.id,
      agentId: agent,
      state: 'awaiting_payment',
      livemode: false,
      lines: [
        { sku: 'coffee', name: 'Item coffee', qty: 2, unitPrice: '4.50', lineTotal: '9.00' },
        { sku: 'dime', name: 'Item dime', qty: 1, unitPrice: '0.10', lineTotal: '0.10' },
      ],
      total: { currency: 'USD', subtotal: '9.10', tax: '0.00', total: '9.10' },
      railName: 'x402',
      paymentRequired: s.pr,
      verdict: null,
      receipt: null,
      orderId: null,
      settlement: null,
      payer: null,
      createdAt: expect.any(Number),
      expiresAt: s.created.body.expires_at,
      next: s.created.body.next,
    });
    expect(Number.isInteger(view.body.createdAt)).toBe(true);
    expect(view.body.expiresAt - view.body.createdAt).toBe(900);

    const buyer = newBuyer();
    const { res } = await payX402(app, shop.base, s, buyer);
    expect(res.status, res.text).toBe(200);
    const after = await poll(app, shop.base, s.id);
    // the address that signed the authorization, as the order page shows it
    expect(after.body.payer?.toLowerCase()).toBe(buyer.address.toLowerCase());
    expect(after.body.state).toBe('accepted');
    expect(after.body.paymentRequired).toBeUndefined();
    expect(after.body.next).toBeUndefined();
    expect(after.body.verdict).toMatchObject({ decision: 'accept', tier: 'cautious', reasonCodes: ['OK'] });
    expect(after.body.orderId).toBe(res.body.order_id);
    expect(after.body.receipt).toBe(res.body.receipt);
    expect(after.body.settlement).toEqual({ rail: 'x402', reference: res.body.fulfillment.reference });
  });

  it("GIVEN a session of one merchant WHEN it is polled or settled under another merchant or an unknown id THEN 404 SESSION_NOT_FOUND", async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const other = await publishedMerchant(app);
    expectError(await poll(app, other.base, s.id), 404, 'SESSION_NOT_FOUND');
    expectError(await poll(app, shop.base, `sess_${ulid().toLowerCase()}`), 404, 'SESSION_NOT_FOUND');
    expectError(await app.request('POST', `${other.base}/agent/checkout/${s.id}/settle`, { body: { payment: { mock: true } } }), 404, 'SESSION_NOT_FOUND');
  });
});
