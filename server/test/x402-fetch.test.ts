import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { wrapFetchWithPayment, wrapFetchWithPaymentFromConfig, x402Client, decodePaymentResponseHeader } from '@x402/fetch';
import { ExactEvmScheme } from '@x402/evm';
import { decodePaymentSignatureHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentRequired } from '@x402/core/types';
import { appendPaymentIdentifierToExtensions, declarePaymentIdentifierExtension, generatePaymentId } from '@x402/extensions/payment-identifier';
import { newBuyer, publishedMerchant, USDC_SEPOLIA } from './helpers/agent.js';
import { eventTypes, hostRequest, ordersOf, poll, verifyReceipt } from './helpers/agent-protocol.js';
import { TestApp, TEST_PAY_TO } from './helpers/harness.js';
import { DomainProofWorld, verifyDomainByTxt } from './helpers/domain-proof.js';
import { ordersOfMerchant, paymentRequiredOf, paymentResponseOf, recordingFetch, x402Sessions } from './helpers/x402.js';
import { payerAgentId } from '../src/modules/x402/agent-id.js';

/**
 * Test mode (mock facilitator, base-sepolia) through an unmodified @x402/fetch client, as its
 * README shows it: wrapFetchWithPayment + x402Client + ExactEvmScheme from @x402/evm.
 */
let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
const OPEN_POLICY = { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null, maxPerTransactionUsd: 1000 };

beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { policy: OPEN_POLICY, products: [{ sku: 'coffee', amount: '0.25' }, { sku: 'beans', amount: '0.40' }] });
});
afterAll(async () => app?.stop());

/** The client exactly as @x402/fetch's README builds it. */
function stockClient(buyer = newBuyer(), fetchImpl: typeof fetch = fetch) {
  const fetchWithPayment = wrapFetchWithPaymentFromConfig(fetchImpl, { schemes: [{ network: 'eip155:*', client: new ExactEvmScheme(buyer) }] });
  return { buyer, fetchWithPayment };
}

const resourceUrl = (sku: string, base = shop.base) => `${app.baseUrl}${base}/x402/${sku}`;

describe('discovery and the 402 challenge', () => {
  it('GIVEN a published merchant WHEN an agent reads the manifest and GETs a paid resource unpaid THEN 402 with PAYMENT-REQUIRED (v2, well under 3 KB), the v1 body, CORS exposing the headers, and nothing written', async () => {
    const manifest = await app.request('GET', `${shop.base}/.well-known/agentic-checkout.json`);
    expect(manifest.status, manifest.text).toBe(200);
    expect(manifest.body.paid_resources).toHaveLength(2);
    expect(manifest.body.paid_resources).toEqual(
      expect.arrayContaining([
        { sku: 'beans', name: 'Item beans', url: `${shop.base}/x402/beans`, price: { amount: '0.40', currency: 'USD' } },
        { sku: 'coffee', name: 'Item coffee', url: `${shop.base}/x402/coffee`, price: { amount: '0.25', currency: 'USD' } },
      ]),
    );

    const res = await app.request('GET', `${shop.base}/x402/coffee?qty=2`);
    expect(res.status, res.text).toBe(402);
    const header = res.headers.get('payment-required')!;
    console.info(`PAYMENT-REQUIRED header: ${header.length} bytes`);
    expect(header.length).toBeLessThan(1536);
    const pr = paymentRequiredOf(res);
    expect(pr).toEqual({
      x402Version: 2,
      error: 'payment_required',
      resource: { url: `${app.baseUrl}${shop.base}/x402/coffee?qty=2`, description: '2 x Item coffee', mimeType: 'application/json' },
      accepts: [
        {
          scheme: 'exact',
          network: 'eip155:84532',
          amount: '500000',
          asset: USDC_SEPOLIA,
          payTo: TEST_PAY_TO,
          maxTimeoutSeconds: 300,
          extra: { name: 'USDC', version: '2' },
        },
      ],
      // declared as @x402/extensions declares it: {info, schema}
      extensions: { 'payment-identifier': declarePaymentIdentifierExtension(false) },
    });
    expect(res.body).toEqual({
      x402Version: 1,
      error: 'payment_required',
      accepts: [
        {
          scheme: 'exact',
          network: 'base-sepolia',
          maxAmountRequired: '500000',
          resource: `${app.baseUrl}${shop.base}/x402/coffee?qty=2`,
          description: '2 x Item coffee',
          mimeType: 'application/json',
          payTo: TEST_PAY_TO,
          maxTimeoutSeconds: 300,
          asset: USDC_SEPOLIA,
          extra: { name: 'USDC', version: '2' },
        },
      ],
      status: 'payment_required',
      reason_codes: ['PAYMENT_REQUIRED'],
      error_human: expect.any(String),
    });
    expect(res.headers.get('cache-control')).toBe('no-store');
    const exposed = res.headers.get('access-control-expose-headers')!.split(',').map((h) => h.trim());
    expect(exposed).toEqual(expect.arrayContaining(['PAYMENT-REQUIRED', 'PAYMENT-RESPONSE', 'X-PAYMENT-RESPONSE']));
    const preflight = await fetch(resourceUrl('coffee'), { method: 'OPTIONS' });
    const allowed = preflight.headers.get('access-control-allow-headers')!.split(',').map((h) => h.trim().toLowerCase());
    expect(allowed).toEqual(expect.arrayContaining(['payment-signature', 'x-payment', 'x-agent-id', 'access-control-expose-headers']));
    expect(await x402Sessions(app, shop.merchant.id)).toHaveLength(0);

    for (const [path, code] of [
      [`${shop.base}/x402/nope`, 'SKU_UNKNOWN'],
      [`${shop.base}/x402/coffee?qty=0`, 'VALIDATION_FAILED'],
    ] as const) {
      const bad = await app.request('GET', path);
      expect(bad.body.reason_codes, bad.text).toEqual([code]);
    }
  });

  it('GIVEN the discovery host and the verified merchant domain WHEN the paid resource is fetched at their root THEN the same 402, naming that host as configured (the scheme and port of SVC_PUBLIC_BASE_URL)', async () => {
    const world = await DomainProofWorld.start();
    world.install(app);
    await verifyDomainByTxt(app, world, shop.key, shop.merchant.id).finally(() => world.close());
    const viaSlug = await hostRequest(app, 'GET', '/x402/coffee', `${shop.merchant.slug}.svc.localhost`);
    expect(viaSlug.status, viaSlug.text).toBe(402);
    const viaDomain = await hostRequest(app, 'GET', '/x402/coffee', shop.merchant.domain);
    expect(viaDomain.status, viaDomain.text).toBe(402);
    for (const [res, host] of [[viaSlug, `${shop.merchant.slug}.svc.localhost`], [viaDomain, shop.merchant.domain]] as const) {
      const pr = JSON.parse(Buffer.from(String(res.headers['payment-required']), 'base64').toString('utf8')) as PaymentRequired;
      expect(pr.resource.url).toBe(`http://${host}:${new URL(app.baseUrl).port}/x402/coffee`);
      expect(pr.accepts[0]).toMatchObject({ amount: '250000', payTo: TEST_PAY_TO, network: 'eip155:84532' });
    }
  });
});

describe('an unmodified @x402/fetch client buys', () => {
  it('GIVEN the stock client WHEN it GETs the paid resource THEN it pays by itself: 200 with the order, receipt and reference, PAYMENT-RESPONSE naming the settlement, the order and its events once, the agent id derived from the payer', async () => {
    const rec = recordingFetch();
    const { buyer, fetchWithPayment } = stockClient(newBuyer(), rec.fetch);
    const res = await fetchWithPayment(resourceUrl('coffee'), { method: 'GET' });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(rec.log.map((e) => e.status)).toEqual([402, 200]);
    expect(rec.log[1]!.requestHeaders['payment-signature']).toBeTruthy();

    expect(body).toEqual({
      status: 'accepted',
      session_id: expect.stringMatching(/^sess_/),
      order_id: expect.stringMatching(/^ord_/),
      receipt: expect.any(String),
      fulfillment: { rail: 'x402', reference: expect.stringMatching(/^0x[0-9a-f]{64}$/) },
    });
    const settled = decodePaymentResponseHeader(res.headers.get('payment-response')!);
    expect(settled).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'eip155:84532', payer: buyer.address });

    const { claims } = await verifyReceipt(app, shop.base, body.receipt);
    expect(claims).toMatchObject({ orderId: body.order_id, sessionId: body.session_id, settlementRef: body.fulfillment.reference });
    expect(await ordersOf(app, body.session_id)).toHaveLength(1);
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
    const view = await poll(app, shop.base, body.session_id);
    expect(view.body).toMatchObject({ state: 'accepted', agentId: payerAgentId(buyer.address), orderId: body.order_id });
    // The payer's name-based UUID is stable and a well-formed version-5 UUID.
    expect(payerAgentId(buyer.address.toLowerCase())).toBe(payerAgentId(buyer.address));
    expect(payerAgentId(buyer.address)).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  });

  it('GIVEN an X-Agent-Id header and a quantity WHEN the stock client buys THEN the session belongs to that agent and charges qty x price', async () => {
    const agent = randomUUID();
    const { fetchWithPayment } = stockClient();
    const res = await fetchWithPayment(`${resourceUrl('beans')}?qty=2`, { headers: { 'X-Agent-Id': agent } });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    const view = await poll(app, shop.base, body.session_id);
    expect(view.body).toMatchObject({ agentId: agent, lines: [{ sku: 'beans', qty: 2, lineTotal: '0.80' }], total: { total: '0.80' } });
  });

  it('GIVEN a paid PAYMENT-SIGNATURE WHEN it is sent again (and again at once, twice) THEN the same 200 and PAYMENT-RESPONSE, and still one session and one order', async () => {
    const rec = recordingFetch();
    const { fetchWithPayment } = stockClient(newBuyer(), rec.fetch);
    const first = await fetchWithPayment(resourceUrl('coffee'));
    const firstBody = await first.text();
    expect(first.status, firstBody).toBe(200);
    const signature = rec.log[1]!.requestHeaders['payment-signature']!;
    const before = (await ordersOfMerchant(app, shop.merchant.id)).length;

    const replays = await Promise.all([0, 1, 2].map(() => fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': signature } })));
    for (const r of replays) {
      expect(r.status).toBe(200);
      expect(await r.text()).toBe(firstBody);
      expect(r.headers.get('payment-response')).toBe(first.headers.get('payment-response'));
    }
    expect((await ordersOfMerchant(app, shop.merchant.id)).length).toBe(before);
    const sessionId = JSON.parse(firstBody).session_id;
    expect((await x402Sessions(app, shop.merchant.id)).filter((s) => s.id === sessionId)).toHaveLength(1);
    expect(await ordersOf(app, sessionId)).toHaveLength(1);

    // The same authorization on another resource is the same nonce: never a second payment.
    const other = await fetch(resourceUrl('beans'), { headers: { 'PAYMENT-SIGNATURE': signature } });
    expect(other.status).toBe(402);
    expect(((await other.json()) as any).reason_codes).toEqual(['PAYMENT_AMOUNT_MISMATCH']);
    expect((await ordersOfMerchant(app, shop.merchant.id)).length).toBe(before);
  });
});

describe('refused payments answer in x402 shape with our reason code', () => {
  /** The stock client signs whatever requirement it is given: tamper with the 402 it read. */
  async function payTampered(mutate: (accept: PaymentRequired['accepts'][number]) => void) {
    const buyer = newBuyer();
    const client = new x402Client().register('eip155:*', new ExactEvmScheme(buyer));
    const unpaid = await fetch(resourceUrl('coffee'));
    const pr = paymentRequiredOf(unpaid);
    mutate(pr.accepts[0]!);
    const payload = await client.createPaymentPayload(pr);
    return fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) } });
  }

  it('GIVEN a wrong amount, recipient, network, an expired authorization or garbage WHEN paid THEN 402 with PAYMENT-REQUIRED carrying the x402 error, our code in the body, and no session or order', async () => {
    const sessionsBefore = (await x402Sessions(app, shop.merchant.id)).length;
    const ordersBefore = (await ordersOfMerchant(app, shop.merchant.id)).length;
    const cases: Array<[string, (a: PaymentRequired['accepts'][number]) => void, string, string]> = [
      ['amount', (a) => void (a.amount = '249999'), 'PAYMENT_AMOUNT_MISMATCH', 'invalid_exact_evm_payload_authorization_value'],
      ['overpaid amount', (a) => void (a.amount = '250001'), 'PAYMENT_AMOUNT_MISMATCH', 'invalid_exact_evm_payload_authorization_value'],
      ['recipient', (a) => void (a.payTo = '0x2222222222222222222222222222222222222222'), 'PAYMENT_RECIPIENT_MISMATCH', 'invalid_exact_evm_payload_recipient_mismatch'],
      ['network', (a) => Object.assign(a, { network: 'eip155:8453', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', extra: { name: 'USD Coin', version: '2' } }), 'PAYMENT_NETWORK_MISMATCH', 'invalid_network'],
      ['expired', (a) => void (a.maxTimeoutSeconds = 2), 'PAYMENT_EXPIRED', 'invalid_exact_evm_payload_authorization_valid_before'],
      ['domain', (a) => void (a.extra = { name: 'USD Coin', version: '2' }), 'SIGNER_MISMATCH', 'invalid_exact_evm_payload_signature'],
    ];
    for (const [what, mutate, code, x402Error] of cases) {
      const res = await payTampered(mutate);
      const body = (await res.json()) as any;
      expect(res.status, `${what}: ${JSON.stringify(body)}`).toBe(402);
      expect(body.reason_codes, what).toEqual([code]);
      expect(body).toMatchObject({ x402Version: 1, status: 'payment_invalid', error: x402Error, accepts: [{ maxAmountRequired: '250000' }] });
      const pr = paymentRequiredOf(res);
      expect(pr.error, what).toBe(x402Error);
      expect(pr.accepts[0]).toMatchObject({ amount: '250000', payTo: TEST_PAY_TO, network: 'eip155:84532' });
    }
    const nulNonce = Buffer.from(JSON.stringify({ x402Version: 2, accepted: { scheme: 'exact', network: 'eip155:84532' }, payload: { signature: '0x00', authorization: { from: '0x00', to: '0x00', value: '1', validAfter: '0', validBefore: '1', nonce: '0x\u0000' } } })).toString('base64');
    for (const garbage of ['not base64!', Buffer.from('{"x402Version":2}').toString('base64'), Buffer.from('{"x4').toString('base64'), nulNonce]) {
      const res = await fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': garbage } });
      expect(res.status).toBe(402);
      expect(((await res.json()) as any).reason_codes).toEqual(['PAYMENT_MALFORMED']);
      expect(paymentRequiredOf(res).error).toBe('invalid_payload');
    }
    expect((await x402Sessions(app, shop.merchant.id)).length).toBe(sessionsBefore);
    expect((await ordersOfMerchant(app, shop.merchant.id)).length).toBe(ordersBefore);
  });

  it('GIVEN a merchant whose gate rejects or holds WHEN the stock client pays THEN a rejection is 402 with status rejected and the gate code, and a hold is 202 with the poll call and no PAYMENT-RESPONSE', async () => {
    const strict = await publishedMerchant(app, { policy: { ...OPEN_POLICY, maxPerTransactionUsd: 0.3 }, products: [{ sku: 'coffee', amount: '0.25' }, { sku: 'big', amount: '0.50' }] });
    const rejected = await stockClient().fetchWithPayment(`${app.baseUrl}${strict.base}/x402/big`);
    const rBody = (await rejected.json()) as any;
    expect(rejected.status, JSON.stringify(rBody)).toBe(402);
    expect(rBody).toMatchObject({ status: 'rejected', reason_codes: ['OVER_PER_TX_CAP'], error: 'over_per_tx_cap', session_id: expect.stringMatching(/^sess_/) });
    expect(paymentRequiredOf(rejected).error).toBe('over_per_tx_cap');
    expect(rejected.headers.get('payment-response')).toBeNull();
    expect(await ordersOf(app, rBody.session_id)).toMatchObject([{ decision: 'reject' }]);
    expect(await eventTypes(app, rBody.session_id)).toEqual(['order.rejected']);

    const holding = await publishedMerchant(app, { policy: { ...OPEN_POLICY, holdForReviewBelowTier: 'standard' }, products: [{ sku: 'coffee', amount: '0.25' }] });
    const held = await stockClient().fetchWithPayment(`${app.baseUrl}${holding.base}/x402/coffee`);
    const hBody = (await held.json()) as any;
    expect(held.status, JSON.stringify(hBody)).toBe(202);
    expect(hBody).toMatchObject({ status: 'hold', reason_codes: expect.arrayContaining([expect.any(String)]), next: `GET ${holding.base}/agent/checkout/${hBody.session_id}` });
    expect(held.headers.get('payment-response')).toBeNull();
    expect((await poll(app, holding.base, hBody.session_id)).body.state).toBe('held');
    expect(await eventTypes(app, hBody.session_id)).toEqual(['order.held']);
  });
});

describe('payment-identifier idempotency', () => {
  it('GIVEN a payment-identifier WHEN the same id comes with the same payload THEN the cached result; with another payload THEN 409 and no second order', async () => {
    const buyer = newBuyer();
    const client = new x402Client().register('eip155:*', new ExactEvmScheme(buyer));
    const pr = paymentRequiredOf(await fetch(resourceUrl('coffee')));
    const id = generatePaymentId();
    const signed = async () => {
      const payload = await client.createPaymentPayload(pr);
      appendPaymentIdentifierToExtensions(payload.extensions!, id);
      return encodePaymentSignatureHeader(payload);
    };
    const header = await signed();
    expect(decodePaymentSignatureHeader(header).extensions).toEqual({ 'payment-identifier': { ...declarePaymentIdentifierExtension(false), info: { required: false, id } } });
    const first = await fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': header } });
    const firstText = await first.text();
    expect(first.status, firstText).toBe(200);
    const again = await fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': header } });
    expect(again.status).toBe(200);
    expect(await again.text()).toBe(firstText);

    const conflict = await fetch(resourceUrl('coffee'), { headers: { 'PAYMENT-SIGNATURE': await signed() } });
    const cBody = (await conflict.json()) as any;
    expect(conflict.status, JSON.stringify(cBody)).toBe(409);
    expect(cBody.reason_codes).toEqual(['IDEMPOTENCY_KEY_REUSED']);
    const sessionId = JSON.parse(firstText).session_id;
    expect((await x402Sessions(app, shop.merchant.id)).filter((s) => s.idempotency_key === `x402-pid:${id}`)).toHaveLength(1);
    expect(await ordersOf(app, sessionId)).toHaveLength(1);
  });
});

describe('the payment-identifier a client echoes', () => {
  async function paidWith(extension: unknown) {
    const pr = paymentRequiredOf(await fetch(resourceUrl('beans')));
    const payload = await new x402Client().register('eip155:*', new ExactEvmScheme(newBuyer())).createPaymentPayload(pr);
    payload.extensions = { 'payment-identifier': extension };
    const res = await fetch(resourceUrl('beans'), { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) } });
    return { status: res.status, body: (await res.json()) as any };
  }

  it('GIVEN the declaration echoed with a schema of the client\'s own WHEN paid THEN the id is judged by the declared rules alone: the client\'s schema is never compiled', async () => {
    // a schema Ajv cannot even compile (an invalid pattern): compiling it would refuse the payment
    const foreign = { type: 'object', properties: { id: { type: 'string', pattern: '(' } } };
    const ok = await paidWith({ info: { required: false, id: generatePaymentId() }, schema: foreign });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    // the rules still hold whatever schema comes with them
    const short = await paidWith({ info: { required: false, id: 'short' }, schema: {} });
    expect(short.status).toBe(402);
    expect(short.body.reason_codes).toEqual(['PAYMENT_MALFORMED']);
    expect(short.body.error_human).toMatch(/16-128 characters/);
  });
});

describe('the settle route speaks x402 too', () => {
  async function openSession() {
    const r = await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'coffee', qty: 1 }] } });
    expect(r.status, r.text).toBe(201);
    return r.body.session_id as string;
  }

  it('GIVEN an open session WHEN a stock client POSTs its settle URL THEN 402 PAYMENT-REQUIRED for the session, then it pays with PAYMENT-SIGNATURE and gets PAYMENT-RESPONSE', async () => {
    const id = await openSession();
    const url = `${app.baseUrl}${shop.base}/agent/checkout/${id}/settle`;
    const unpaid = await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`);
    expect(unpaid.status, unpaid.text).toBe(402);
    expect(unpaid.body).toMatchObject({ status: 'payment_required', session_id: id, accepts: [{ maxAmountRequired: '250000', network: 'base-sepolia' }] });
    expect(paymentRequiredOf(unpaid).accepts[0]).toMatchObject({ amount: '250000', network: 'eip155:84532', payTo: TEST_PAY_TO });

    const buyer = newBuyer();
    const fetchWithPayment = wrapFetchWithPayment(fetch, new x402Client().register('eip155:84532', new ExactEvmScheme(buyer)));
    const res = await fetchWithPayment(url, { method: 'POST' });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(body).toMatchObject({ status: 'accepted', order_id: expect.stringMatching(/^ord_/) });
    expect(paymentResponseOf(res)).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'eip155:84532', payer: buyer.address });
    expect((await poll(app, shop.base, id)).body).toMatchObject({ state: 'accepted', settlement: { reference: body.fulfillment.reference } });

    // Paid: a further unpaid POST is told the session is settled, not asked to pay again.
    const after = await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`);
    expect(after.status).toBe(409);
    expect(after.body.reason_codes).toEqual(['SESSION_ALREADY_SETTLED']);
  });

  it('GIVEN an open session WHEN a PAYMENT-SIGNATURE for the wrong amount is sent to settle THEN 402 in x402 shape (v1 body, PAYMENT-REQUIRED error) with our code, and the session stays open', async () => {
    const id = await openSession();
    const pr = paymentRequiredOf(await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`));
    pr.accepts[0]!.amount = '1';
    const payload = await new x402Client().register('eip155:*', new ExactEvmScheme(newBuyer())).createPaymentPayload(pr);
    const res = await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) } });
    expect(res.status, res.text).toBe(402);
    expect(res.body).toMatchObject({ x402Version: 1, status: 'payment_invalid', reason_codes: ['PAYMENT_AMOUNT_MISMATCH'], error: 'invalid_exact_evm_payload_authorization_value', session_id: id, accepts: [{ maxAmountRequired: '250000' }] });
    expect(paymentRequiredOf(res).error).toBe('invalid_exact_evm_payload_authorization_value');
    expect((await poll(app, shop.base, id)).body.state).toBe('awaiting_payment');
  });

  it('GIVEN @x402/evm\'s payment payload WHEN it is the JSON settle body (string validAfter/validBefore, scheme exact) THEN it settles like today\'s shape, and the same authorization replays', async () => {
    const id = await openSession();
    const pr = paymentRequiredOf(await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`));
    const payload = await new x402Client().register('eip155:*', new ExactEvmScheme(newBuyer())).createPaymentPayload(pr);
    const auth = (payload.payload as any).authorization;
    expect(typeof auth.validAfter).toBe('string');
    expect(payload.accepted.scheme).toBe('exact');

    const res = await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`, { body: { payment: payload } });
    expect(res.status, res.text).toBe(200);
    expect(paymentResponseOf(res).transaction).toBe(res.body.fulfillment.reference);
    // The same authorization in the flat shape with x402's scheme name is the same payment: a replay.
    const flat = { payment: { scheme: 'exact', authorization: auth, signature: (payload.payload as any).signature } };
    const replay = await app.request('POST', `${shop.base}/agent/checkout/${id}/settle`, { body: flat });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.body).toEqual(res.body);
    expect(await ordersOf(app, id)).toHaveLength(1);
  });
});
