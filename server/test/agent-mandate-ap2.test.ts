import http, { type Server } from 'node:http';
import { createHash, randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SDJwtInstance } from '@sd-jwt/core';
import { digest, ES256, generateSalt } from '@sd-jwt/crypto-nodejs';
import { exportJWK, generateKeyPair, SignJWT, type JWK } from 'jose';
import { privateKeyToAccount, generatePrivateKey } from 'viem/accounts';
import { AgentClient, presentAp2Mandate, type Ap2Holder } from '@svc/sdk';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, ordersOf, payX402, poll, verifyReceipt } from './helpers/agent-protocol.js';
import { TestApp } from './helpers/harness.js';

/**
 * AP2 v0.2 mandates (issue 28): SD-JWT credentials issued here by an independent issuer (the
 * @sd-jwt/core issuer API, ES256 keys made by the test, its JWKS served on a local HTTP server),
 * presented through HTTP and the agent SDK, verified by the gate against the merchant's
 * trusted_ap2_issuers. Carts over 5 USD need a mandate; 2 coffees are 9.00.
 */

/** An AP2 issuer (a trusted surface): its ES256 key signs SD-JWT mandates; the JWKS is served at `url`. */
class Ap2Issuer {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly kid: string,
    private readonly sd: SDJwtInstance<Record<string, unknown>>,
  ) {}

  static async start(): Promise<Ap2Issuer> {
    const { publicKey, privateKey } = await ES256.generateKeyPair();
    const kid = `ap2-${randomUUID()}`;
    const server = http.createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [{ ...publicKey, kid, alg: 'ES256', use: 'sig' }] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
    const sd = new SDJwtInstance<Record<string, unknown>>({ hasher: digest, saltGenerator: generateSalt, signer: await ES256.getSigner(privateKey), signAlg: 'ES256' });
    return new Ap2Issuer(server, url, kid, sd);
  }

  /** An SD-JWT mandate: `claims` plus iat/exp, the `disclose` claims selectively disclosable (all disclosed). */
  async issue(claims: Record<string, unknown>, disclose: string[] = []): Promise<string> {
    const now = Math.floor(Date.now() / 1000);
    return this.sd.issue({ iat: now, exp: now + 600, ...claims }, { _sd: disclose } as never, { header: { kid: this.kid, typ: 'dc+sd-jwt' } });
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** The agent's key an open mandate binds (cnf.jwk). */
async function agentKey(): Promise<{ holder: Ap2Holder; jwk: JWK }> {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  return { holder: { key: privateKey, alg: 'ES256' }, jwk: await exportJWK(publicKey) };
}

let app: TestApp;
let issuer: Ap2Issuer;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
const policy = { requireMandateOverUsd: 5, holdForReviewBelowTier: null };
beforeAll(async () => {
  app = await TestApp.start();
  issuer = await Ap2Issuer.start();
  shop = await publishedMerchant(app, { merchant: { trusted_ap2_issuers: [issuer.url] }, policy });
});
afterAll(async () => {
  await app?.stop();
  await issuer?.stop();
});

const merchantObj = (id: string) => ({ id, name: 'Coffee shop' });

/** A merchant-signed UCP checkout for `lines` (sku, qty, unit price in cents) and the closed Checkout Mandate over it. */
async function closedCheckout(merchantId: string, lines: Array<[string, number, number]>, total: number, over: Record<string, unknown> = {}) {
  const { privateKey } = await generateKeyPair('ES256');
  const checkoutJwt = await new SignJWT({
    line_items: lines.map(([id, quantity, price]) => ({ item: { id, title: `Item ${id}`, price }, quantity })),
    currency: 'USD',
    totals: [{ type: 'total', amount: total }],
  })
    .setProtectedHeader({ alg: 'ES256' })
    .setIssuer(merchantId)
    .sign(privateKey);
  const checkoutHash = createHash('sha256').update(checkoutJwt).digest('base64url');
  return issuer.issue({ vct: 'mandate.checkout.1', checkout_jwt: checkoutJwt, checkout_hash: checkoutHash, ...over }, ['checkout_jwt']);
}

/** An open Payment Mandate binding `jwk`, with `constraints` (allowed_payees disclosable). */
const openPayment = (jwk: JWK, constraints: unknown[], over: Record<string, unknown> = {}, by = issuer) =>
  by.issue({ vct: 'mandate.payment.open.1', cnf: { jwk }, constraints, ...over });

const payeeIs = (id: string) => ({ type: 'payment.allowed_payees', allowed: [merchantObj(id)] });
const range = (max: number, currency = 'USD') => ({ type: 'payment.amount_range', currency, max, min: 100 });

/** Opens the 9.00 cart with `mandate` at `m` and settles it over x402. */
async function buyWith(mandate: Record<string, unknown>, m = shop) {
  const s = await openSession(app, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agentId(), mandate });
  const { res } = await payX402(app, m.base, s, newBuyer());
  return { s, res };
}

function expectRejected(res: { status: number; body: any; text: string }, code: string) {
  expect(res.status, res.text).toBe(403);
  expect(res.body).toEqual({ status: 'rejected', reason_codes: [code], error_human: expect.any(String) });
}

/** Replaces disclosure `i` of a presentation with one that carries `value` (same salt and name). */
function tamperDisclosure(token: string, i: number, value: unknown): string {
  const parts = token.split('~');
  const [salt, name] = JSON.parse(Buffer.from(parts[i]!, 'base64url').toString('utf8')) as [string, string, unknown];
  parts[i] = Buffer.from(JSON.stringify([salt, name, value])).toString('base64url');
  return parts.join('~');
}

describe('AP2 mandates', () => {
  it('GIVEN a closed checkout mandate for exactly this cart WHEN the agent settles THEN 200, tier trusted, mandate_type ap2 and a mandate_ref on the order and receipt', async () => {
    const token = await closedCheckout(shop.merchant.id, [['coffee', 2, 450]], 900);
    const { s, res } = await buyWith({ type: 'ap2', token });
    expect(res.status, res.text).toBe(200);
    const [order] = await ordersOf(app, s.id);
    expect(order).toMatchObject({ decision: 'accept', trust_tier: 'trusted', mandate_type: 'ap2', mandate_ref: expect.stringMatching(/^ap2:[A-Za-z0-9_-]{43}$/) });
    const { claims } = await verifyReceipt(app, shop.base, res.body.receipt);
    expect(claims).toMatchObject({ mandateType: 'ap2', mandateRef: order!.mandate_ref });
    expect((await poll(app, shop.base, s.id)).body.verdict).toMatchObject({ decision: 'accept', tier: 'trusted' });
  });

  it('GIVEN an open payment mandate bound to the agent key WHEN the agent SDK attaches it to a purchase THEN the KB-JWT binds it to this merchant and it settles trusted', async () => {
    const { holder, jwk } = await agentKey();
    const credential = await openPayment(jwk, [payeeIs(shop.merchant.id), range(2000), { type: 'payment.budget', max: 10, currency: 'USD' }, { type: 'payment.reference', conditional_transaction_id: 'x' }]);
    const agent = new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: randomUUID() });
    const handle = await agent.discover(`${app.baseUrl}${shop.base}`);
    expect(handle.manifest.mandate.accepted).toEqual(['svc', 'ap2', 'none']);
    const outcome = await handle.buy([{ sku: 'coffee', qty: 2 }], { mandate: await handle.ap2Mandate(credential, holder) });
    expect(outcome.status, JSON.stringify(outcome)).toBe('accepted');
    const [order] = await ordersOf(app, outcome.session_id);
    expect(order).toMatchObject({ trust_tier: 'trusted', mandate_type: 'ap2' });
  });

  it('GIVEN an open checkout mandate (allowed merchants, acceptable line items) WHEN the cart fits THEN 200; a cart outside it is MANDATE_CART_MISMATCH', async () => {
    const { holder, jwk } = await agentKey();
    const constraints = (qty: number) => [
      { type: 'checkout.allowed_merchants', allowed: [merchantObj(shop.merchant.id)] },
      { type: 'checkout.line_items', items: [{ id: 'r1', acceptable_items: [{ id: 'coffee', title: 'Coffee' }, { id: 'tea', title: 'Tea' }], quantity: qty }] },
    ];
    const present = async (qty: number) =>
      presentAp2Mandate(await issuer.issue({ vct: 'mandate.checkout.open.1', cnf: { jwk }, constraints: constraints(qty) }), { audience: shop.merchant.id, holder });
    expect((await buyWith(await present(2))).res.status).toBe(200);
    expectRejected((await buyWith(await present(1))).res, 'MANDATE_CART_MISMATCH');
  });

  it('GIVEN a closed payment mandate WHEN its payee and amount are this checkout THEN 200; another amount is MANDATE_AMOUNT_OUT_OF_RANGE', async () => {
    const pay = (amount: number) =>
      issuer.issue({ vct: 'mandate.payment.1', transaction_id: 'tx', payee: merchantObj(shop.merchant.id), payment_amount: { amount, currency: 'USD' }, payment_instrument: { type: 'x402' } });
    expect((await buyWith({ type: 'ap2', token: await pay(900) })).res.status).toBe(200);
    expectRejected((await buyWith({ type: 'ap2', token: await pay(899) })).res, 'MANDATE_AMOUNT_OUT_OF_RANGE');
  });

  it('GIVEN a spent AP2 mandate WHEN it is presented again (even with a fresh key binding) THEN 403 MANDATE_REPLAY', async () => {
    const token = await closedCheckout(shop.merchant.id, [['coffee', 2, 450]], 900);
    expect((await buyWith({ type: 'ap2', token })).res.status).toBe(200);
    const again = await buyWith({ type: 'ap2', token });
    expectRejected(again.res, 'MANDATE_REPLAY');
    expect((await ordersOf(app, again.s.id))[0]).toMatchObject({ decision: 'reject', mandate_type: 'ap2' });

    const { holder, jwk } = await agentKey();
    const open = await openPayment(jwk, [payeeIs(shop.merchant.id), range(2000)]);
    expect((await buyWith(await presentAp2Mandate(open, { audience: shop.merchant.id, holder }))).res.status).toBe(200);
    expectRejected((await buyWith(await presentAp2Mandate(open, { audience: shop.merchant.id, holder }))).res, 'MANDATE_REPLAY');
  });

  it('GIVEN AP2 mandates that fail WHEN the agent settles THEN 403 with each failure its own code, the session rejected', async () => {
    const other = await Ap2Issuer.start();
    const { holder, jwk } = await agentKey();
    const stranger = await agentKey();
    const bound = async (constraints: unknown[], opts: { audience?: string; by?: Ap2Issuer; over?: Record<string, unknown> } = {}) =>
      presentAp2Mandate(await openPayment(jwk, constraints, opts.over, opts.by), { audience: opts.audience ?? shop.merchant.id, holder });
    const fine = [payeeIs(shop.merchant.id), range(2000)];
    try {
      const valid = await closedCheckout(shop.merchant.id, [['coffee', 2, 450]], 900);
      const [h, p, sig] = valid.split('~')[0]!.split('.');
      const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(p!, 'base64url').toString()), exp: 9_999_999_999 })).toString('base64url');
      const cases: Array<[string, Record<string, unknown>]> = [
        ['MANDATE_MALFORMED', { type: 'ap2', token: 'not-an-sd-jwt' }],
        ['MANDATE_MALFORMED', { type: 'ap2' }],
        ['MANDATE_MALFORMED', { type: 'ap2', token: await issuer.issue({ vct: 'mandate.unknown.1' }) }],
        ['MANDATE_ISSUER_UNKNOWN', { type: 'ap2', token: await other.issue({ vct: 'mandate.checkout.1' }) }],
        ['MANDATE_INVALID_SIGNATURE', { type: 'ap2', token: [[h, forgedPayload, sig].join('.'), ...valid.split('~').slice(1)].join('~') }],
        ['MANDATE_EXPIRED', { type: 'ap2', token: await closedCheckout(shop.merchant.id, [['coffee', 2, 450]], 900, { exp: Math.floor(Date.now() / 1000) - 60 }) }],
        ['MANDATE_DISCLOSURE_INVALID', { type: 'ap2', token: tamperDisclosure(valid, 1, 'eyJhbGciOiJFUzI1NiJ9.e30.x') }],
        ['MANDATE_KEY_BINDING_INVALID', { type: 'ap2', token: await openPayment(jwk, fine) }],
        ['MANDATE_KEY_BINDING_INVALID', await bound(fine, { audience: `mrch_${'0'.repeat(26)}` })],
        ['MANDATE_KEY_BINDING_INVALID', await presentAp2Mandate(await openPayment(jwk, fine), { audience: shop.merchant.id, holder: stranger.holder })],
        ['MANDATE_KEY_BINDING_INVALID', await presentAp2Mandate(await openPayment(jwk, fine), { audience: shop.merchant.id, holder, now: new Date(Date.now() - 3_600_000) })],
        ['MANDATE_MERCHANT_MISMATCH', await bound([payeeIs('mrch_someoneelse'), range(2000)])],
        ['MANDATE_MERCHANT_MISMATCH', { type: 'ap2', token: await closedCheckout('mrch_someoneelse', [['coffee', 2, 450]], 900) }],
        ['MANDATE_CURRENCY_MISMATCH', await bound([payeeIs(shop.merchant.id), range(2000, 'EUR')])],
        ['MANDATE_AMOUNT_OUT_OF_RANGE', await bound([payeeIs(shop.merchant.id), range(800)])],
        ['MANDATE_BUDGET_EXCEEDED', await bound([...fine, { type: 'payment.budget', max: 8.99, currency: 'USD' }])],
        ['MANDATE_CART_MISMATCH', { type: 'ap2', token: await closedCheckout(shop.merchant.id, [['coffee', 1, 450]], 450) }],
        ['MANDATE_CART_MISMATCH', { type: 'ap2', token: await closedCheckout(shop.merchant.id, [['coffee', 2, 400]], 900) }],
        ['MANDATE_CONSTRAINT_UNSUPPORTED', await bound([...fine, { type: 'payment.allowed_pisps', allowed: [{ id: 'p', name: 'PISP' }] }])],
        ['MANDATE_TYPE_UNSUPPORTED', { type: 'acp', token: 'x' }],
      ];
      for (const [code, mandate] of cases) {
        const { s, res } = await buyWith(mandate);
        expectRejected(res, code);
        expect((await poll(app, shop.base, s.id)).body.state, code).toBe('rejected');
      }
      const acp = await buyWith({ type: 'acp', token: 'x' });
      expect(acp.res.body.error_human).toContain('no crypto payment handler');
    } finally {
      await other.stop();
    }
  });

  it("GIVEN a mandate bound to another merchant WHEN presented at a merchant that trusts the same issuer THEN it does not bind (key binding audience and payee)", async () => {
    const second = await publishedMerchant(app, { merchant: { trusted_ap2_issuers: [issuer.url] }, policy });
    const { holder, jwk } = await agentKey();
    const forFirst = await presentAp2Mandate(await openPayment(jwk, [range(2000)]), { audience: shop.merchant.id, holder });
    expectRejected((await buyWith(forFirst, second)).res, 'MANDATE_KEY_BINDING_INVALID');
    const payeeFirst = await presentAp2Mandate(await openPayment(jwk, [payeeIs(shop.merchant.id), range(2000)]), { audience: second.merchant.id, holder });
    expectRejected((await buyWith(payeeFirst, second)).res, 'MANDATE_MERCHANT_MISMATCH');
    // a merchant that trusts no AP2 issuer (every merchant, until it lists one)
    const none = await publishedMerchant(app, { policy });
    expectRejected((await buyWith({ type: 'ap2', token: await closedCheckout(none.merchant.id, [['coffee', 2, 450]], 900) }, none)).res, 'MANDATE_ISSUER_UNKNOWN');
  });

  it('GIVEN trusted_ap2_issuers WHEN written THEN each URL passes the SSRF rules (a private address is 400), and an unreachable issuer is 403 MANDATE_ISSUER_UNAVAILABLE, not a 500, until it is reachable', async () => {
    const priv = await app.request('POST', '/v1/merchants', {
      key: shop.key,
      body: { slug: `ap2-${randomUUID().slice(0, 8)}`, name: 'x', domain: 'x.example', receiving: { x402: { chain: 'base-sepolia', address: newBuyer().address } }, trusted_ap2_issuers: ['http://10.0.0.7/jwks.json'] },
    });
    expect(priv.status, priv.text).toBe(400);
    expect(priv.body.error_human).toContain('trusted_ap2_issuers[0]');

    const gone = await Ap2Issuer.start();
    await gone.stop();
    const m = await publishedMerchant(app, { merchant: { trusted_ap2_issuers: [gone.url] }, policy });
    const token = await closedCheckout(m.merchant.id, [['coffee', 2, 450]], 900);
    const s = await openSession(app, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agentId(), mandate: { type: 'ap2', token } });
    const buyer = newBuyer();
    expectRejected((await payX402(app, m.base, s, buyer)).res, 'MANDATE_ISSUER_UNAVAILABLE');
    expect((await poll(app, m.base, s.id)).body.state).toBe('awaiting_payment');

    const fixed = await app.request('PATCH', `/v1/merchants/${m.merchant.id}`, { key: m.key, body: { trusted_ap2_issuers: [gone.url, issuer.url] } });
    expect(fixed.status, fixed.text).toBe(200);
    expect(fixed.body.trusted_ap2_issuers).toEqual([gone.url, issuer.url]);
    // the dead issuer is walked first and the key found at the second
    const { res } = await payX402(app, m.base, s, buyer);
    expect(res.status, res.text).toBe(200);
  });
});
