import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { agentId, publishedMerchant } from './helpers/agent.js';
import { etagOf, hostRequest } from './helpers/agent-protocol.js';
import { configVersion, expectError, onPostgres } from './helpers/foundation.js';
import { until } from './helpers/agent-cache.js';
import { merchantBody, TEST_PAY_TO, TestApp, type TestKey } from './helpers/harness.js';
import { DomainProofWorld, verifyDomainByTxt } from './helpers/domain-proof.js';

const DISCOVERY = 'pay.example.test';
const MANIFEST = '/.well-known/agentic-checkout.json';
const LIVE_PAY_TO = '0x2222222222222222222222222222222222222222';

let app: TestApp;
let world: DomainProofWorld;
beforeAll(async () => {
  app = await TestApp.start({ SVC_DISCOVERY_DOMAIN: DISCOVERY });
  world = await DomainProofWorld.start();
  world.install(app);
});
afterAll(async () => {
  await app?.stop();
  await world?.close();
});

const newSlug = () => `disc-${ulid().toLowerCase().slice(-12)}`;

async function manifestOf(a: TestApp, base: string, headers: Record<string, string> = {}) {
  const res = await a.request('GET', `${base}${MANIFEST}`, { headers });
  return res;
}

describe('manifest by path', () => {
  it('GIVEN a published test merchant WHEN the manifest is fetched by id and by slug THEN both describe it with the prefix the agent used, with the fields of 2.12', async () => {
    const policy = { requireMandateOverUsd: 50, maxPerTransactionUsd: 250, minReputationTier: 'trusted' };
    const { merchant } = await publishedMerchant(app, { policy });

    const byId = await manifestOf(app, `/m/${merchant.id}`);
    expect(byId.status, byId.text).toBe(200);
    const expected = (prefix: string) => ({
      protocol: 'svc-checkout/0.1',
      merchant: { id: merchant.id, name: 'Test Shop', domain: merchant.domain, domain_verified: false },
      livemode: false,
      catalog_url: `${prefix}/agent/catalog`,
      checkout_url: `${prefix}/agent/checkout`,
      jwks_url: `${prefix}/.well-known/jwks.json`,
      mcp_url: `${prefix}/mcp`,
      rails: ['x402', 'mock'],
      pay_to: { x402: { chain: 'base-sepolia', address: TEST_PAY_TO, asset: 'USDC' }, mock: { account: 'acct_test' } },
      mandate: { accepted: ['svc', 'ap2', 'none'], preferred: 'svc' },
      policy_summary: { require_mandate_over_usd: 50, max_per_transaction_usd: 250, min_reputation_tier: 'trusted' },
      paid_resources: expect.arrayContaining([
        { sku: 'coffee', name: 'Item coffee', url: `${prefix}/x402/coffee`, price: { amount: '4.50', currency: 'USD' } },
        { sku: 'beans', name: 'Item beans', url: `${prefix}/x402/beans`, price: { amount: '12.00', currency: 'USD' } },
      ]),
    });
    expect(byId.body).toEqual(expected(`/m/${merchant.id}`));

    const bySlug = await manifestOf(app, `/m/${merchant.slug}`);
    expect(bySlug.status, bySlug.text).toBe(200);
    expect(bySlug.body).toEqual(expected(`/m/${merchant.slug}`));

    for (const res of [byId, bySlug]) {
      expect(res.headers.get('etag')).toBe(etagOf(res.text));
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('cache-control')).toMatch(/max-age=\d+/);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    }
    // The two prefixes give different bytes, so different validators.
    expect(byId.headers.get('etag')).not.toBe(bySlug.headers.get('etag'));
  });

  it('GIVEN a fetched manifest WHEN it is revalidated with If-None-Match THEN a match is 304 with no body and a stale validator is 200', async () => {
    const { base } = await publishedMerchant(app);
    const first = await manifestOf(app, base);
    const etag = first.headers.get('etag')!;

    const same = await manifestOf(app, base, { 'if-none-match': etag });
    expect(same.status).toBe(304);
    expect(same.text).toBe('');
    expect(same.headers.get('etag')).toBe(etag);

    const weakInList = await manifestOf(app, base, { 'if-none-match': `"0000", W/${etag}` });
    expect(weakInList.status).toBe(304);

    const stale = await manifestOf(app, base, { 'if-none-match': '"00000000000000000000000000000000"' });
    expect(stale.status).toBe(200);
    expect(stale.text).toBe(first.text);
  });

  it('GIVEN an unknown merchant or one that never published WHEN any agent route is called THEN it is 404 NOT_FOUND', async () => {
    const key = await app.key('test');
    const unpublished = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
    expect(unpublished.status).toBe(201);
    await app.request('POST', `/v1/catalog?merchant_id=${unpublished.body.id}`, {
      key,
      body: { sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' } },
    });
    const refs = [`mrch_${ulid().toLowerCase()}`, newSlug(), unpublished.body.id, unpublished.body.slug];
    for (const ref of refs) {
      expectError(await app.request('GET', `/m/${ref}${MANIFEST}`), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/m/${ref}/.well-known/jwks.json`), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/m/${ref}/agent/catalog`), 404, 'NOT_FOUND');
      expectError(
        await app.request('POST', `/m/${ref}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } }),
        404,
        'NOT_FOUND',
      );
    }
    // The unpublished merchant's own domain is not routed to it either, even verified.
    await verifyDomainByTxt(app, world, key, unpublished.body.id);
    expectError(await hostRequest(app, 'GET', MANIFEST, unpublished.body.domain).then(asApi), 404, 'NOT_FOUND');
  });
});

/** hostRequest's response in the shape expectError takes. */
function asApi(r: { status: number; body: any; text: string }) {
  return { status: r.status, body: r.body, text: r.text, headers: new Headers() };
}

describe('slug resolution across modes', () => {
  it('GIVEN one project with one slug in test and live mode WHEN an agent uses the slug THEN it names the live merchant once that is published, else the test one; ids always name their own', async () => {
    const slug = newSlug();
    const testSide = await publishedMerchant(app, { merchant: { slug } });
    // A slug belongs to one project (merchant_slugs): only its own live merchant may share it.
    const liveKey: TestKey = await app.key('live', { projectId: testSide.key.projectId });
    const live = await app.request('POST', '/v1/merchants', {
      key: liveKey,
      body: merchantBody({ slug, domain: `${slug}.live.example.com`, receiving: { x402: { chain: 'base', address: LIVE_PAY_TO } }, rails: ['x402'] }),
    });
    expect(live.status, live.text).toBe(201);

    // The live merchant exists but is unpublished, so invisible: the slug still names the test merchant.
    const before = await manifestOf(app, `/m/${slug}`);
    expect(before.status, before.text).toBe(200);
    expect(before.body.merchant.id).toBe(testSide.merchant.id);
    expect(before.body.livemode).toBe(false);

    await app.request('POST', `/v1/catalog?merchant_id=${live.body.id}`, {
      key: liveKey,
      body: { sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' } },
    });
    const pub = await app.request('POST', `/v1/publish?merchant_id=${live.body.id}`, { key: liveKey });
    expect(pub.status, pub.text).toBe(200);

    const after = await manifestOf(app, `/m/${slug}`);
    expect(after.status).toBe(200);
    expect(after.body).toMatchObject({
      merchant: { id: live.body.id },
      livemode: true,
      rails: ['x402'],
      pay_to: { x402: { chain: 'base', address: LIVE_PAY_TO, asset: 'USDC' } },
    });
    expect(after.body.pay_to.mock).toBeUndefined();

    const viaHost = await hostRequest(app, 'GET', MANIFEST, `${slug}.${DISCOVERY}`);
    expect(viaHost.body.merchant.id).toBe(live.body.id);

    const testById = await manifestOf(app, `/m/${testSide.merchant.id}`);
    expect(testById.body.merchant.id).toBe(testSide.merchant.id);
    expect(testById.body.livemode).toBe(false);
    const liveById = await manifestOf(app, `/m/${live.body.id}`);
    expect(liveById.body.merchant.id).toBe(live.body.id);
  });
});

describe('discovery host and merchant domain', () => {
  it('GIVEN a published merchant WHEN an agent calls <slug>.<discovery domain> at the root THEN the agent routes answer there with root-relative paths', async () => {
    const { merchant } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null } });
    const host = `${merchant.slug}.${DISCOVERY}`;

    const manifest = await hostRequest(app, 'GET', MANIFEST, host);
    expect(manifest.status, manifest.text).toBe(200);
    expect(manifest.body).toMatchObject({
      merchant: { id: merchant.id },
      catalog_url: '/agent/catalog',
      checkout_url: '/agent/checkout',
      jwks_url: '/.well-known/jwks.json',
      mcp_url: '/mcp',
    });
    expect(manifest.headers.etag).toBe(etagOf(manifest.text));
    expect(manifest.headers['access-control-allow-origin']).toBe('*');
    const revalidated = await hostRequest(app, 'GET', MANIFEST, host, { headers: { 'if-none-match': manifest.headers.etag as string } });
    expect(revalidated.status).toBe(304);
    expect(revalidated.text).toBe('');

    // Host names are case-insensitive and may carry a port.
    const upper = await hostRequest(app, 'GET', MANIFEST, `${host.toUpperCase()}:8443`);
    expect(upper.status).toBe(200);
    expect(upper.body.merchant.id).toBe(merchant.id);

    const catalog = await hostRequest(app, 'GET', '/agent/catalog', host);
    expect(catalog.body.items.map((i: any) => i.sku).sort()).toEqual(['beans', 'coffee']);
    const jwks = await hostRequest(app, 'GET', '/.well-known/jwks.json', host);
    expect(jwks.body.keys[0].kid).toBe(merchant.receipt_kid);

    const created = await hostRequest(app, 'POST', '/agent/checkout', host, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } });
    expect(created.status, created.text).toBe(201);
    expect(created.body.next.startsWith(`POST /agent/checkout/${created.body.session_id}/settle `)).toBe(true);
    const polled = await hostRequest(app, 'GET', `/agent/checkout/${created.body.session_id}`, host);
    expect(polled.body).toMatchObject({ id: created.body.session_id, merchantId: merchant.id, state: 'awaiting_payment' });
    expect(polled.body.next).toBe(created.body.next);

    const unknown = await hostRequest(app, 'GET', MANIFEST, `${newSlug()}.${DISCOVERY}`);
    expectError(asApi(unknown), 404, 'NOT_FOUND');
    // Only a single label in front of the discovery domain is a slug.
    const nested = await hostRequest(app, 'GET', MANIFEST, `x.${merchant.slug}.${DISCOVERY}`);
    expectError(asApi(nested), 404, 'NOT_FOUND');
    // The bare origin serves no agent routes.
    expectError(await app.request('GET', MANIFEST), 404, 'NOT_FOUND');
  });

  it("GIVEN a published merchant with a verified domain WHEN its own storefront domain is the Host THEN the agent routes answer for that merchant", async () => {
    const { key, merchant } = await publishedMerchant(app);
    await verifyDomainByTxt(app, world, key, merchant.id);
    const manifest = await hostRequest(app, 'GET', MANIFEST, merchant.domain);
    expect(manifest.status, manifest.text).toBe(200);
    expect(manifest.body.merchant).toEqual({ id: merchant.id, name: 'Test Shop', domain: merchant.domain, domain_verified: true });
    expect(manifest.body.catalog_url).toBe('/agent/catalog');
    const catalog = await hostRequest(app, 'GET', '/agent/catalog', merchant.domain.toUpperCase());
    expect(catalog.status).toBe(200);
    expect(catalog.body.items).toHaveLength(2);
  });
});

describe('manifest freshness', () => {
  it('GIVEN a cached manifest WHEN the catalog, receiving, policy publish or merchant name change THEN the next manifest reflects the change and its ETag is always the hash of the bytes served', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { maxPerTransactionUsd: 100 } });
    const q = `?merchant_id=${merchant.id}`;
    const m0 = await manifestOf(app, base);
    const v0 = await configVersion(app, merchant.id);

    // A catalog write bumps the version; the manifest lists each item's x402 paid resource, so it changes at once.
    const created = await app.request('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '3.00', currency: 'USD' } } });
    expect(created.status).toBe(201);
    expect(await configVersion(app, merchant.id)).toBeGreaterThan(v0);
    const m1 = await manifestOf(app, base);
    expect(m1.text).not.toBe(m0.text);
    expect(m1.body.paid_resources.map((r: any) => r.sku)).toContain('tea');
    expect(m1.headers.get('etag')).toBe(etagOf(m1.text));
    expect((await app.request('GET', `${base}/agent/catalog`)).body.items.map((i: any) => i.sku)).toContain('tea');

    const v1 = await configVersion(app, merchant.id);
    await app.request('PATCH', `/v1/catalog/tea${q}`, { key, body: { available: false } });
    expect(await configVersion(app, merchant.id)).toBeGreaterThan(v1);
    expect((await app.request('GET', `${base}/agent/catalog`)).body.items.map((i: any) => i.sku)).not.toContain('tea');
    expect((await manifestOf(app, base)).text).toBe(m0.text);

    // Receiving applies at once.
    const newAddress = '0x3333333333333333333333333333333333333333';
    const put = await app.request('PUT', `/v1/receiving${q}`, { key, body: { receiving: { x402: { chain: 'base-sepolia', address: newAddress }, mock: { account: 'acct_test' } } } });
    expect(put.status, put.text).toBe(200);
    const m2 = await manifestOf(app, base, { 'if-none-match': m1.headers.get('etag')! });
    expect(m2.status).toBe(200);
    expect(m2.body.pay_to.x402.address).toBe(newAddress);
    expect(m2.headers.get('etag')).toBe(etagOf(m2.text));
    expect(m2.headers.get('etag')).not.toBe(m1.headers.get('etag'));

    // A new policy version changes nothing until it is published.
    const pol = await app.request('PUT', `/v1/policy${q}`, { key, body: { body: { maxPerTransactionUsd: 99 } } });
    expect(pol.status).toBe(201);
    const m3 = await manifestOf(app, base);
    expect(m3.text).toBe(m2.text);
    const pub = await app.request('POST', `/v1/publish${q}`, { key });
    expect(pub.status).toBe(200);
    const m4 = await manifestOf(app, base);
    expect(m4.body.policy_summary.max_per_transaction_usd).toBe(99);
    expect(m4.headers.get('etag')).toBe(etagOf(m4.text));
    expect(m4.headers.get('etag')).not.toBe(m3.headers.get('etag'));

    const renamed = await app.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { name: 'Renamed Shop' } });
    expect(renamed.status).toBe(200);
    const m5 = await manifestOf(app, base);
    expect(m5.body.merchant.name).toBe('Renamed Shop');
    expect(m5.headers.get('etag')).toBe(etagOf(m5.text));
  });

  it('GIVEN two server processes on one database WHEN a write goes through one THEN the other serves the new manifest once the NOTIFY has reached it', async () => {
    const { key, merchant, base } = await publishedMerchant(app);
    // A second process needs PostgreSQL (PGlite is in-process); without it, the same app reads again.
    const other = onPostgres
      ? await TestApp.start({ SVC_DISCOVERY_DOMAIN: DISCOVERY, SVC_MASTER_KEY: app.config.SVC_MASTER_KEY! }, { target: app.target })
      : app;
    try {
      const warm = await manifestOf(other, base);
      expect(warm.status).toBe(200);
      expect(warm.body.pay_to.x402.address).toBe(TEST_PAY_TO);

      const address = '0x4444444444444444444444444444444444444444';
      const put = await app.request('PUT', `/v1/receiving?merchant_id=${merchant.id}`, {
        key,
        body: { receiving: { x402: { chain: 'base-sepolia', address }, mock: { account: 'acct_test' } } },
      });
      expect(put.status).toBe(200);
      // Another process hears of the write by NOTIFY at commit: a barrier, not a timing assertion (agent-cache.pg.test.ts).
      const fresh = await until('the new address on the other process', () => manifestOf(other, base, { 'if-none-match': warm.headers.get('etag')! }), (r) => r.status === 200);
      expect(fresh.body.pay_to.x402.address).toBe(address);
      expect(fresh.headers.get('etag')).toBe(etagOf(fresh.text));

      await app.request('PUT', `/v1/policy?merchant_id=${merchant.id}`, { key, body: { body: { requireMandateOverUsd: 7 } } });
      await app.request('POST', `/v1/publish?merchant_id=${merchant.id}`, { key });
      await until('the published policy on the other process', () => manifestOf(other, base), (r) => r.body.policy_summary.require_mandate_over_usd === 7);
      // And a session opened through the other process pays the new address.
      const co = await other.request('POST', `${base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } });
      expect(co.body.payment_required.payTo).toBe(address);
    } finally {
      if (other !== app) await other.stop();
    }
  });
});

describe('manifest rails and defaults', () => {
  it('GIVEN no policy THEN the summary shows the defaults; GIVEN allowedRails THEN only those rails and their pay_to are advertised', async () => {
    const plain = await publishedMerchant(app);
    const m1 = await manifestOf(app, plain.base);
    expect(m1.body.policy_summary).toEqual({ require_mandate_over_usd: 20, max_per_transaction_usd: 500, min_reputation_tier: 'standard' });
    const open = await publishedMerchant(app, { policy: { allowedRails: ['x402'], requireMandateOverUsd: null, maxPerTransactionUsd: null, minReputationTier: null } });
    const m2 = await manifestOf(app, open.base);
    expect(m2.body.rails).toEqual(['x402']);
    expect(Object.keys(m2.body.pay_to)).toEqual(['x402']);
    expect(m2.body.policy_summary).toEqual({ require_mandate_over_usd: null, max_per_transaction_usd: null, min_reputation_tier: null });
  });

  it('GIVEN a browser agent WHEN it preflights an agent route THEN CORS allows any origin with the headers it needs', async () => {
    const { base } = await publishedMerchant(app);
    const res = await app.request('OPTIONS', `${base}/agent/checkout`, { headers: { origin: 'https://agent.example', 'access-control-request-method': 'POST' } });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('access-control-allow-methods')).toContain('POST');
    expect(res.headers.get('access-control-allow-headers')).toMatch(/Content-Type/);
    expect(res.headers.get('access-control-allow-headers')).toMatch(/If-None-Match/);
  });
});

describe('agent key set and catalog', () => {
  it('GIVEN a published merchant WHEN an agent reads jwks.json and the catalog THEN it gets the receipt key and only available items, prices byte for byte', async () => {
    const { key, merchant, base } = await publishedMerchant(app, {
      products: [
        { sku: 'coffee', amount: '4.50' },
        { sku: 'fine', amount: '0.12345678' },
        { sku: 'gone', amount: '1.00', available: false },
      ],
    });
    const jwks = await app.request('GET', `${base}/.well-known/jwks.json`);
    expect(jwks.status).toBe(200);
    expect(jwks.body.keys).toHaveLength(1);
    expect(jwks.body.keys[0]).toMatchObject({ kid: merchant.receipt_kid, kty: 'OKP', crv: 'Ed25519', x: (merchant as any).receipt_pub_jwk.x });
    const mgmt = await app.request('GET', `/v1/merchants/${merchant.id}/jwks`);
    expect(jwks.body).toEqual(mgmt.body);
    expect(jwks.headers.get('cache-control')).toBe('public, max-age=300');
    expect(jwks.headers.get('access-control-allow-origin')).toBe('*');

    const catalog = await app.request('GET', `${base}/agent/catalog`);
    expect(catalog.status).toBe(200);
    const bySku = Object.fromEntries(catalog.body.items.map((i: any) => [i.sku, i]));
    expect(Object.keys(bySku).sort()).toEqual(['coffee', 'fine']);
    expect(bySku.fine.price).toEqual({ amount: '0.12345678', currency: 'USD' });
    expect(bySku.coffee.price).toEqual({ amount: '4.50', currency: 'USD' });

    // Deleting makes an item unavailable: it leaves the agent catalog.
    const del = await app.request('DELETE', `/v1/catalog/coffee?merchant_id=${merchant.id}`, { key });
    expect(del.status).toBe(204);
    const after = await app.request('GET', `${base}/agent/catalog`);
    expect(after.body.items.map((i: any) => i.sku)).toEqual(['fine']);
  });
});
