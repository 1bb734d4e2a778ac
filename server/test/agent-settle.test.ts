import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import type { Hex } from 'viem';
import { agentId, newBuyer, publishedMerchant, signPayment } from './helpers/agent.js';
import { eventTypes, openSession, ordersOf, payX402, poll, settle, verifyReceipt } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } });
});
afterAll(async () => app?.stop());

const nonce = () => `0x${randomBytes(32).toString('hex')}` as Hex;
/** The agent's test-mode score (a test key reads test mode; a read without a key answers live). */
const reputationOf = async (agent: string) => (await app.request('GET', `/v1/reputation/agent/${agent}`, { key: shop.key })).body;

/** THEN-helper for a 402: exactly {status, reason_codes, error_human} with the one code. */
function expectPaymentInvalid(res: { status: number; body: any; text: string }, code: string) {
  expect(res.status, res.text).toBe(402);
  expect(Object.keys(res.body).sort()).toEqual(['error_human', 'reason_codes', 'status']);
  expect(res.body.status).toBe('payment_invalid');
  expect(res.body.reason_codes).toEqual([code]);
  expect(res.body.error_human.length).toBeGreaterThan(0);
}

describe('accepted settle and its receipt', () => {
  it('GIVEN a signed authorization WHEN the session is settled THEN 200 with a receipt that verifies offline against the JWKS and carries the decisions.md claims', async () => {
    const agent = agentId();
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent });
    const { res } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(['fulfillment', 'order_id', 'receipt', 'status']);
    expect(res.body.status).toBe('accepted');
    expect(res.body.order_id).toMatch(/^ord_[0-9a-z]{26}$/);
    expect(res.body.fulfillment).toEqual({ rail: 'x402', reference: expect.stringMatching(/^0x[0-9a-f]{64}$/) });

    const { header, claims } = await verifyReceipt(app, shop.base, res.body.receipt);
    expect(header).toEqual({ alg: 'EdDSA', typ: 'svc-receipt+jws', kid: shop.merchant.receipt_kid });
    const policy = await app.request('GET', `/v1/policy?merchant_id=${shop.merchant.id}`, { key: shop.key });
    expect(policy.body.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(Object.keys(claims).sort()).toEqual(
      [
        'iss', 'sub', 'iat', 'sessionId', 'orderId', 'merchantId', 'agentId', 'decision', 'total', 'reasonCodes', 'mandateType',
        'mandateRef', 'policyHash', 'policyVersion', 'rail', 'settlementRef', 'chain', 'livemode', 'inputFingerprint',
      ].sort(),
    );
    expect(claims).toMatchObject({
      iss: 'svc-checkout',
      sub: expect.stringMatching(/^rcpt_[0-9a-z]{26}$/),
      sessionId: s.id,
      orderId: res.body.order_id,
      merchantId: shop.merchant.id,
      agentId: agent,
      decision: 'accept',
      total: { currency: 'USD', subtotal: '9.00', tax: '0.00', total: '9.00' },
      reasonCodes: ['OK'],
      mandateType: 'none',
      mandateRef: null,
      policyHash: policy.body.hash,
      policyVersion: policy.body.version,
      rail: 'x402',
      settlementRef: res.body.fulfillment.reference,
      chain: 'base-sepolia',
      livemode: false,
      inputFingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(Number.isInteger(claims.iat)).toBe(true);
    // The management JWKS verifies it too.
    const mgmt = await app.request('GET', `/v1/merchants/${shop.merchant.id}/jwks`);
    expect(mgmt.body.keys[0].x).toBe((await app.request('GET', `${shop.base}/.well-known/jwks.json`)).body.keys[0].x);

    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ id: res.body.order_id, decision: 'accept', trust_tier: 'cautious', mandate_type: 'none', settlement_ref: res.body.fulfillment.reference });
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    const events = await sql<{ payload: any }>(app, "select payload from events where payload->'data'->'object'->>'session_id' = ? order by seq", [s.id]);
    for (const { payload } of events) {
      expect(payload).toMatchObject({ id: expect.stringMatching(/^evt_/), livemode: false, api_version: 'v1', created: expect.any(Number) });
      expect(payload.data.object).toEqual({
        id: res.body.order_id,
        source: 'hosted',
        session_id: s.id,
        merchant_id: shop.merchant.id,
        agent_id: agent,
        total: { currency: 'USD', subtotal: '9.00', tax: '0.00', total: '9.00' },
        items: [{ sku: 'coffee', qty: 2 }],
        rail_name: 'x402',
        settlement_ref: res.body.fulfillment.reference,
        receipt_id: claims.sub,
        mandate_type: 'none',
        mandate_ref: null,
        trust_tier: 'cautious',
      });
    }
  });
});

describe('payment_invalid (402)', () => {
  it('GIVEN bad proofs of payment WHEN each is settled THEN 402 with its code, the session stays awaiting_payment, and a correct payment then succeeds', async () => {
    const agent = agentId();
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
    const buyer = newBuyer();
    const now = Math.floor(Date.now() / 1000);
    const cases: Array<[string, () => Promise<unknown>]> = [
      ['SIGNER_MISMATCH', () => signPayment(buyer, s.pr, { domainName: 'USD Coin' })],
      ['PAYMENT_AMOUNT_MISMATCH', () => signPayment(buyer, s.pr, { value: String(BigInt(s.pr.amountBaseUnits) - 1n) })],
      // an overpayment is refused too: the authorization is for exactly the total
      ['PAYMENT_AMOUNT_MISMATCH', () => signPayment(buyer, s.pr, { value: String(BigInt(s.pr.amountBaseUnits) + 1n) })],
      ['PAYMENT_RECIPIENT_MISMATCH', () => signPayment(buyer, s.pr, { to: '0x9999999999999999999999999999999999999999' })],
      ['PAYMENT_EXPIRED', () => signPayment(buyer, s.pr, { validBefore: now + 5 })],
      ['PAYMENT_EXPIRED', () => signPayment(buyer, s.pr, { validAfter: now - 900, validBefore: now - 600 })],
      ['PAYMENT_NOT_YET_VALID', () => signPayment(buyer, s.pr, { validAfter: now + 120 })],
      [
        'PAYMENT_MALFORMED',
        async () => {
          const p = await signPayment(buyer, s.pr);
          return { payment: { ...p.payment, authorization: { ...p.payment.authorization, nonce: '0x1234' } } };
        },
      ],
      [
        'PAYMENT_MALFORMED',
        async () => {
          const p = await signPayment(buyer, s.pr);
          return { payment: { ...p.payment, signature: '0xdeadbeef' } };
        },
      ],
      [
        'PAYMENT_SCHEME_UNSUPPORTED',
        async () => {
          const p = await signPayment(buyer, s.pr);
          return { payment: { ...p.payment, scheme: 'x402-upto' } };
        },
      ],
      ['PAYMENT_SCHEME_UNSUPPORTED', async () => ({ payment: { mock: true } })],
      [
        // Signed by the buyer, claimed for someone else.
        'SIGNER_MISMATCH',
        async () => {
          const p = await signPayment(buyer, s.pr);
          return { payment: { ...p.payment, authorization: { ...p.payment.authorization, from: newBuyer().address } } };
        },
      ],
    ];
    for (const [code, make] of cases) {
      const res = await settle(app, shop.base, s.id, await make());
      expectPaymentInvalid(res, code);
    }
    const view = await poll(app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'awaiting_payment', verdict: null, orderId: null, receipt: null });
    expect(view.body.paymentRequired).toEqual(s.pr);
    expect(await ordersOf(app, s.id)).toHaveLength(0);
    expect(await eventTypes(app, s.id)).toEqual([]);
    // payment_invalid costs the agent 5 points, once for the session however many bad proofs it sends.
    expect(await reputationOf(agent)).toEqual({ agentId: agent, score: 495, tier: 'standard', known: true });

    const { res } = await payX402(app, shop.base, s, buyer);
    expect(res.status, res.text).toBe(200);
    expect((await poll(app, shop.base, s.id)).body.state).toBe('accepted');
  });

  it('GIVEN the server clock WHEN validAfter and validBefore sit on the boundaries THEN validAfter = now and validBefore = now + 6 are valid, one second further is not', async () => {
    const realNow = app.services.now;
    const nowMs = Math.floor(Date.now() / 1000) * 1000;
    const now = nowMs / 1000;
    app.services.now = () => new Date(nowMs);
    try {
      const buyer = newBuyer();
      const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
      expectPaymentInvalid((await payX402(app, shop.base, s, buyer, { validAfter: now + 1 })).res, 'PAYMENT_NOT_YET_VALID');
      expectPaymentInvalid((await payX402(app, shop.base, s, buyer, { validBefore: now + 5 })).res, 'PAYMENT_EXPIRED');
      const ok = (await payX402(app, shop.base, s, buyer, { validAfter: now, validBefore: now + 6 })).res;
      expect(ok.status, ok.text).toBe(200);
    } finally {
      app.services.now = realNow;
    }
  });

  it('GIVEN an authorization already used WHEN its nonce is presented for another session THEN 402 NONCE_ALREADY_USED and that session can still be paid', async () => {
    const buyer = newBuyer();
    const first = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const agent = agentId();
    const second = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
    expect(second.pr.amountBaseUnits).toBe(first.pr.amountBaseUnits);
    const reused = nonce();
    const paid = await payX402(app, shop.base, first, buyer, { nonce: reused });
    expect(paid.res.status).toBe(200);

    expectPaymentInvalid(await settle(app, shop.base, second.id, paid.payment), 'NONCE_ALREADY_USED');
    // A fresh signature over the same (from, nonce) is the same authorization on chain.
    expectPaymentInvalid((await payX402(app, shop.base, second, buyer, { nonce: reused, validBefore: Math.floor(Date.now() / 1000) + 200 })).res, 'NONCE_ALREADY_USED');
    expect((await poll(app, shop.base, second.id)).body.state).toBe('awaiting_payment');
    expect(await ordersOf(app, second.id)).toHaveLength(0);
    // A replay attempt costs 25.
    expect((await reputationOf(agent)).score).toBe(475);
    // Another payer may use the same nonce value.
    const other = await payX402(app, shop.base, second, newBuyer(), { nonce: reused });
    expect(other.res.status, other.res.text).toBe(200);
  });
});

describe('concurrency and replay', () => {
  it('GIVEN one authorization WHEN it settles two sessions at the same moment THEN one is accepted and the other is 402 NONCE_ALREADY_USED', async () => {
    const [a, b] = await Promise.all([1, 2].map(() => openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }])));
    const payment = await signPayment(newBuyer(), a!.pr);
    const results = await Promise.all([settle(app, shop.base, a!.id, payment), settle(app, shop.base, b!.id, payment)]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 402]);
    expectPaymentInvalid(results.find((r) => r.status === 402)!, 'NONCE_ALREADY_USED');
    expect((await sql(app, 'select 1 from orders where session_id in (?, ?)', [a!.id, b!.id])).length).toBe(1);
  });

  it('GIVEN one payment WHEN it is settled 20 times at once THEN every answer is the same 200 and exactly one order exists', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'beans', qty: 1 }]);
    const payment = await signPayment(newBuyer(), s.pr);
    const all = await Promise.all(Array.from({ length: 20 }, () => settle(app, shop.base, s.id, payment)));
    for (const r of all) {
      expect(r.status, r.text).toBe(200);
      expect(r.text).toBe(all[0]!.text);
    }
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    expect(await sql(app, 'select 1 from receipts where session_id = ?', [s.id])).toHaveLength(1);
  });

  it('GIVEN 20 different payments WHEN they settle one session at once THEN exactly one is 200 and the rest 409 SESSION_ALREADY_SETTLED', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'beans', qty: 1 }]);
    const payments = await Promise.all(Array.from({ length: 20 }, () => signPayment(newBuyer(), s.pr)));
    const all = await Promise.all(payments.map((p) => settle(app, shop.base, s.id, p)));
    const ok = all.filter((r) => r.status === 200);
    expect(ok).toHaveLength(1);
    for (const r of all.filter((x) => x.status !== 200)) expectError(r, 409, 'SESSION_ALREADY_SETTLED');
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await sql(app, 'select 1 from payment_nonces where session_id = ?', [s.id])).toHaveLength(1);
    // The winner's payment still replays.
    const winner = payments[all.indexOf(ok[0]!)]!;
    const again = await settle(app, shop.base, s.id, winner);
    expect(again.status).toBe(200);
    expect(again.text).toBe(ok[0]!.text);
  });

  it('GIVEN a terminal session WHEN the same payment is sent again THEN the result replays byte for byte; a different payment is 409', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const buyer = newBuyer();
    const { res, payment } = await payX402(app, shop.base, s, buyer);
    expect(res.status).toBe(200);
    const again = await settle(app, shop.base, s.id, payment);
    expect(again.status).toBe(200);
    expect(again.text).toBe(res.text);
    expectError((await payX402(app, shop.base, s, buyer)).res, 409, 'SESSION_ALREADY_SETTLED');
    expectError(await settle(app, shop.base, s.id, { payment: { mock: true } }), 409, 'SESSION_ALREADY_SETTLED');

    // A rejection replays the same way.
    const capped = await publishedMerchant(app, { policy: { maxPerTransactionUsd: 1 } });
    const r = await openSession(app, capped.base, [{ sku: 'coffee', qty: 1 }]);
    const rejected = await payX402(app, capped.base, r, buyer);
    expect(rejected.res.status).toBe(403);
    const replay = await settle(app, capped.base, r.id, rejected.payment);
    expect(replay.status).toBe(403);
    expect(replay.text).toBe(rejected.res.text);
    expectError((await payX402(app, capped.base, r, buyer)).res, 409, 'SESSION_ALREADY_SETTLED');
    expect(await ordersOf(app, r.id)).toHaveLength(1);
  });

  it('GIVEN an unknown session id WHEN it is settled THEN 404 SESSION_NOT_FOUND', async () => {
    expectError(await settle(app, shop.base, `sess_${ulid().toLowerCase()}`, { payment: { mock: true } }), 404, 'SESSION_NOT_FOUND');
    expectError(await settle(app, shop.base, 'not-a-session', { payment: { mock: true } }), 404, 'SESSION_NOT_FOUND');
  });
});

describe('card rail', () => {
  it('GIVEN a merchant offering the card stub WHEN a card session is settled THEN 402 RAIL_NOT_IMPLEMENTED and the session stays open', async () => {
    const card = await publishedMerchant(app, {
      merchant: {
        receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111' }, card: { processor: 'stripe', accountId: 'acct_1' } },
        rails: ['x402', 'card'],
      },
      products: [
        { sku: 'coffee', amount: '4.50' },
        { sku: 'croissant', amount: '2.00', currency: 'EUR' },
      ],
    });
    const s = await openSession(app, card.base, [{ sku: 'croissant', qty: 1 }], { rail: 'card' });
    expect(s.pr).toMatchObject({ rail: 'card', scheme: 'card', currency: 'EUR', amount: '2.00', amountBaseUnits: null, chain: null });
    const res = await settle(app, card.base, s.id, { payment: { mock: true } });
    expectPaymentInvalid(res, 'RAIL_NOT_IMPLEMENTED');
    expect((await poll(app, card.base, s.id)).body.state).toBe('awaiting_payment');
    expect(await ordersOf(app, s.id)).toHaveLength(0);
  });
});

describe('settle body validation', () => {
  it('GIVEN a payment of the wrong shape WHEN it is settled THEN 400 VALIDATION_FAILED naming the payment, before the gate', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const good = await signPayment(newBuyer(), s.pr);
    // payment is a union (x402 or mock), so the message names body.payment rather than the inner field.
    // An x402 session settled with no payment at all is an x402 challenge (server/test/x402-fetch.test.ts), and
    // validAfter/validBefore may be decimal strings as @x402/evm sends them; a non-integer string is still refused.
    const cases: Array<[unknown, string]> = [
      [{ payment: { ...good.payment, authorization: { ...good.payment.authorization, validAfter: '1.5' } } }, 'body.payment'],
      [{ payment: { ...good.payment, authorization: { ...good.payment.authorization, extra: 1 } } }, 'body.payment'],
      [{ payment: { mock: false } }, 'body.payment'],
      [{ payment: { mock: true }, extra: 1 }, 'extra'],
    ];
    for (const [body, field] of cases) {
      const res = await settle(app, shop.base, s.id, body);
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain(field);
    }
    expect((await poll(app, shop.base, s.id)).body.state).toBe('awaiting_payment');
    expect((await settle(app, shop.base, s.id, good)).status).toBe(200);
  });
});

describe('mock rail', () => {
  it('GIVEN a session on the mock rail WHEN it is settled with {payment:{mock:true}} THEN 200 with a mock_ reference and a receipt naming the mock rail', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expect(s.pr).toMatchObject({ rail: 'mock', scheme: 'mock', payTo: 'acct_test', amount: '4.50' });
    expectPaymentInvalid((await payX402(app, shop.base, { ...s, pr: { ...s.pr, payTo: '0x1111111111111111111111111111111111111111', amountBaseUnits: '4500000', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e', eip712Domain: { name: 'USDC', version: '2' } } }, newBuyer())).res, 'PAYMENT_SCHEME_UNSUPPORTED');

    const res = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.fulfillment).toEqual({ rail: 'mock', reference: expect.stringMatching(/^mock_[0-9a-z]{26}$/) });
    const { claims } = await verifyReceipt(app, shop.base, res.body.receipt);
    expect(claims).toMatchObject({ rail: 'mock', chain: null, settlementRef: res.body.fulfillment.reference, sessionId: s.id });
    const again = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(again.text).toBe(res.text);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
  });
});
