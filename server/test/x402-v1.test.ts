import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeXPaymentResponse, wrapFetchWithPayment } from 'x402-fetch';
import { createWalletClient, http } from 'viem';
import { baseSepolia } from 'viem/chains';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { eventTypes, ordersOf, poll } from './helpers/agent-protocol.js';
import { TestApp, TEST_PAY_TO } from './helpers/harness.js';
import { ordersOfMerchant, recordingFetch } from './helpers/x402.js';
import { payerAgentId } from '../src/modules/x402/agent-id.js';

/**
 * x402 v1 compatibility with the v1 client from the npm registry (x402-fetch 1.x): it reads
 * the v1 JSON 402 body, pays with X-PAYMENT and gets X-PAYMENT-RESPONSE. Test mode (mock).
 */
let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, {
    policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null },
    products: [{ sku: 'coffee', amount: '0.05' }],
  });
});
afterAll(async () => app?.stop());

/** A v1 signer: a viem wallet client on base-sepolia (signing is local; the transport is never called). */
function v1Wallet() {
  const account = newBuyer();
  return { account, wallet: createWalletClient({ account, chain: baseSepolia, transport: http('http://127.0.0.1:9') }) };
}

describe('an x402 v1 client (x402-fetch 1.x) buys', () => {
  it('GIVEN the v1 client WHEN it GETs the paid resource THEN it pays from the v1 402 body with X-PAYMENT and gets 200 with X-PAYMENT-RESPONSE, one order and its events', async () => {
    const { account, wallet } = v1Wallet();
    const rec = recordingFetch();
    const fetchWithPayment = wrapFetchWithPayment(rec.fetch, wallet as never, 1_000_000n);
    const res = await fetchWithPayment(`${app.baseUrl}${shop.base}/x402/coffee`, { method: 'GET' });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(rec.log.map((e) => e.status)).toEqual([402, 200]);
    const xPayment = rec.log[1]!.requestHeaders['x-payment']!;
    const sent = JSON.parse(Buffer.from(xPayment, 'base64').toString('utf8'));
    expect(sent).toMatchObject({ x402Version: 1, scheme: 'exact', network: 'base-sepolia', payload: { authorization: { to: TEST_PAY_TO, value: '50000' } } });

    expect(body).toMatchObject({ status: 'accepted', order_id: expect.stringMatching(/^ord_/), fulfillment: { rail: 'x402' } });
    expect(res.headers.get('payment-response')).toBeNull();
    expect(decodeXPaymentResponse(res.headers.get('x-payment-response')!)).toEqual({
      success: true,
      transaction: body.fulfillment.reference,
      network: 'base-sepolia',
      payer: account.address,
    });
    expect(await ordersOf(app, body.session_id)).toHaveLength(1);
    expect(await eventTypes(app, body.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect((await poll(app, shop.base, body.session_id)).body).toMatchObject({ state: 'accepted', agentId: payerAgentId(account.address) });

    // The same X-PAYMENT again: the same answer, no second order.
    const before = (await ordersOfMerchant(app, shop.merchant.id)).length;
    const replay = await fetch(`${app.baseUrl}${shop.base}/x402/coffee`, { headers: { 'X-PAYMENT': xPayment } });
    expect(replay.status).toBe(200);
    expect(await replay.json()).toEqual(body);
    expect(replay.headers.get('x-payment-response')).toBe(res.headers.get('x-payment-response'));
    expect((await ordersOfMerchant(app, shop.merchant.id)).length).toBe(before);
  });

  it('GIVEN a v1 payment for another network WHEN sent THEN 402 with the v1 body naming invalid_network and our PAYMENT_NETWORK_MISMATCH', async () => {
    const { wallet } = v1Wallet();
    const rec = recordingFetch();
    await wrapFetchWithPayment(rec.fetch, wallet as never, 1_000_000n)(`${app.baseUrl}${shop.base}/x402/coffee`);
    const sent = JSON.parse(Buffer.from(rec.log[1]!.requestHeaders['x-payment']!, 'base64').toString('utf8'));
    const forged = Buffer.from(JSON.stringify({ ...sent, network: 'base' })).toString('base64');
    const res = await fetch(`${app.baseUrl}${shop.base}/x402/coffee`, { headers: { 'X-PAYMENT': forged } });
    const body = (await res.json()) as any;
    expect(res.status).toBe(402);
    expect(body).toMatchObject({ x402Version: 1, error: 'invalid_network', reason_codes: ['PAYMENT_NETWORK_MISMATCH'], accepts: [{ network: 'base-sepolia' }] });
  });

  it('GIVEN an open session WHEN the v1 client POSTs its settle URL THEN it pays from the v1 402 body with X-PAYMENT and the session is accepted, with X-PAYMENT-RESPONSE', async () => {
    const created = await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: crypto.randomUUID(), items: [{ sku: 'coffee', qty: 2 }] } });
    expect(created.status, created.text).toBe(201);
    const id = created.body.session_id as string;
    const { account, wallet } = v1Wallet();
    const res = await wrapFetchWithPayment(fetch, wallet as never, 1_000_000n)(`${app.baseUrl}${shop.base}/agent/checkout/${id}/settle`, { method: 'POST' });
    const body = (await res.json()) as any;
    expect(res.status, JSON.stringify(body)).toBe(200);
    expect(decodeXPaymentResponse(res.headers.get('x-payment-response')!)).toEqual({ success: true, transaction: body.fulfillment.reference, network: 'base-sepolia', payer: account.address });
    expect((await poll(app, shop.base, id)).body).toMatchObject({ state: 'accepted', total: { total: '0.10' } });
    expect(await ordersOf(app, id)).toHaveLength(1);
  });
});
