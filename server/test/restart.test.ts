import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sql } from './helpers/foundation.js';
import { merchantBody, TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start({}, { persistent: true });
});
afterAll(async () => app?.stop());

describe('restart', () => {
  it('GIVEN a merchant, product and published policy WHEN the server restarts on the same data THEN all of it reads back unchanged and the seed still decrypts', async () => {
    const key = await app.key('test');
    const created = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
    expect(created.status, created.text).toBe(201);
    const m = created.body;
    const product = await app.request('POST', '/v1/catalog', {
      key,
      body: { sku: 'KEEP-1', name: 'Kept', price: { amount: '000123.10', currency: 'usd' }, category: 'c', metadata: { n: 1 } },
    });
    expect(product.status, product.text).toBe(201);
    const stored = await app.request('PUT', '/v1/policy', { key, body: { body: { maxPerTransactionUsd: 42, allowedRails: ['x402'] }, note: 'v1' } });
    expect(stored.status).toBe(201);
    expect((await app.request('POST', '/v1/publish', { key })).status).toBe(200);
    const draft = await app.request('PUT', '/v1/policy', { key, body: { body: { maxPerTransactionUsd: 43 } } });

    const before = {
      merchant: (await app.request('GET', `/v1/merchants/${m.id}`, { key })).body,
      catalog: (await app.request('GET', '/v1/catalog', { key })).body,
      policy: (await app.request('GET', '/v1/policy', { key })).body,
      jwks: (await app.request('GET', `/v1/merchants/${m.id}/jwks`)).body,
      receiving: (await app.request('GET', '/v1/receiving', { key })).body,
    };

    await app.restart();

    // The API key minted before the restart still authenticates.
    const me = await app.request('GET', '/v1/me', { key });
    expect(me.status).toBe(200);
    expect(me.body.key.id).toBe(key.id);
    expect((await app.request('GET', `/v1/merchants/${m.id}`, { key })).body).toEqual(before.merchant);
    expect(before.merchant.receipt_pub_jwk).toEqual(m.receipt_pub_jwk);
    expect((await app.request('GET', '/v1/catalog', { key })).body).toEqual(before.catalog);
    expect(before.catalog.items[0].price).toEqual({ amount: '000123.10', currency: 'USD' });
    expect((await app.request('GET', '/v1/policy', { key })).body).toEqual(before.policy);
    expect(before.policy).toMatchObject({ version: 1, hash: stored.body.hash, note: 'v1' });
    expect((await app.request('GET', `/v1/merchants/${m.id}/jwks`)).body).toEqual(before.jwks);
    expect((await app.request('GET', '/v1/receiving', { key })).body).toEqual(before.receiving);
    // Version numbering continues where it stopped, and the draft still publishes.
    const next = await app.request('PUT', '/v1/policy', { key, body: { body: {} } });
    expect(next.body.version).toBe(draft.body.version + 1);
    expect((await app.request('POST', '/v1/publish', { key })).body.active_policy_version).toBe(next.body.version);

    // The restarted server's master key opens the seed sealed before the restart, and it
    // is the private half of the published key.
    const [row] = await sql(app, 'select receipt_seed_sealed from merchants where id = ?', [m.id]);
    const d = app.services.box.open(row!.receipt_seed_sealed, m.id);
    const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d, x: m.receipt_pub_jwk.x }, format: 'jwk' });
    expect(createPublicKey(privateKey).export({ format: 'jwk' }).x).toBe(m.receipt_pub_jwk.x);
    const sig = sign(null, Buffer.from('after restart'), privateKey);
    expect(verify(null, Buffer.from('after restart'), createPublicKey({ key: before.jwks.keys[0], format: 'jwk' }), sig)).toBe(true);
  });
});
