import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compactVerify, createLocalJWKSet, decodeProtectedHeader } from 'jose';
import { agentId, newBuyer, publishedMerchant, signPayment } from './helpers/agent.js';
import { TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

describe('agent happy path', () => {
  it('GIVEN a published merchant WHEN an agent discovers, checks out, signs and settles THEN it gets a verifiable receipt, an order and reputation', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { requireMandateOverUsd: 100, holdForReviewBelowTier: null } });
    const manifest = await app.request('GET', `${base}/.well-known/agentic-checkout.json`);
    expect(manifest.status).toBe(200);
    expect(manifest.body.protocol).toBe('svc-checkout/0.1');
    expect(manifest.body.catalog_url).toBe(`${base}/agent/catalog`);
    expect(manifest.headers.get('access-control-allow-origin')).toBe('*');
    const catalog = await app.request('GET', manifest.body.catalog_url);
    expect(catalog.body.items.map((i: any) => i.sku).sort()).toEqual(['beans', 'coffee']);

    const agent = agentId();
    const co = await app.request('POST', manifest.body.checkout_url, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 2 }, { sku: 'beans', qty: 1 }] } });
    expect(co.status, co.text).toBe(201);
    expect(co.body.total).toEqual({ currency: 'USD', subtotal: '21.00', tax: '0.00', total: '21.00' });
    const pr = co.body.payment_required;
    expect(pr).toMatchObject({ amount: '21.00', amountBaseUnits: '21000000', chain: 'base-sepolia', asset: 'USDC', eip712Domain: { name: 'USDC', version: '2' } });
    expect(co.body.next).toContain(`POST ${base}/agent/checkout/${co.body.session_id}/settle`);

    const buyer = newBuyer();
    const payment = await signPayment(buyer, pr);
    const settle = await app.request('POST', `${base}/agent/checkout/${co.body.session_id}/settle`, { body: payment });
    expect(settle.status, settle.text).toBe(200);
    expect(settle.body.status).toBe('accepted');
    expect(settle.body.fulfillment.reference).toMatch(/^0x[0-9a-f]{64}$/);

    const jwks = await app.request('GET', `${base}/.well-known/jwks.json`);
    const { payload } = await compactVerify(settle.body.receipt, createLocalJWKSet(jwks.body));
    const claims = JSON.parse(new TextDecoder().decode(payload));
    expect(decodeProtectedHeader(settle.body.receipt)).toMatchObject({ alg: 'EdDSA', typ: 'svc-receipt+jws', kid: merchant.receipt_kid });
    expect(claims).toMatchObject({ iss: 'svc-checkout', orderId: settle.body.order_id, sessionId: co.body.session_id, agentId: agent, decision: 'accept' });

    const poll = await app.request('GET', `${base}/agent/checkout/${co.body.session_id}`);
    expect(poll.body.state).toBe('accepted');
    expect(poll.body.receipt).toBe(settle.body.receipt);

    const orders = await app.request('GET', '/v1/orders', { key });
    expect(orders.body.data[0]).toMatchObject({ id: settle.body.order_id, decision: 'accept', settlement_ref: settle.body.fulfillment.reference });

    // The merchant's test key reads test mode, where this purchase counted.
    const rep = await app.request('GET', `/v1/reputation/agent/${agent}`, { key });
    expect(rep.body).toEqual({ agentId: agent, score: 510, tier: 'standard', known: true });

    const again = await app.request('POST', `${base}/agent/checkout/${co.body.session_id}/settle`, { body: payment });
    expect(again.status).toBe(200);
    expect(again.text).toBe(settle.text);
  });
});
