import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantBody, TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

describe('smoke', () => {
  it('creates a merchant, a product, a policy and publishes', async () => {
    const key = await app.key('test');
    const m = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
    expect(m.status, m.text).toBe(201);
    const p = await app.request('POST', '/v1/catalog', { key, body: { sku: 'A-1', name: 'Thing', price: { amount: '1.50', currency: 'usd' } } });
    expect(p.status, p.text).toBe(201);
    expect(p.body.price).toEqual({ amount: '1.50', currency: 'USD' });
    const pol = await app.request('PUT', '/v1/policy', { key, body: { body: { maxPerTransactionUsd: 100 } } });
    expect(pol.status, pol.text).toBe(201);
    const pub = await app.request('POST', '/v1/publish', { key });
    expect(pub.status, pub.text).toBe(200);
    expect(pub.body).toEqual({ published: true, ok: true, active_policy_version: 1 });
  });
});
