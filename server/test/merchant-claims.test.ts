import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { publishedMerchant } from './helpers/agent.js';
import { hostRequest } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { DomainProofWorld, proofDomain, verifyDomainByTxt, type ProofInstructions } from './helpers/domain-proof.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

/**
 * Issue 24, item 3: a slug belongs to one project in both modes, and a merchant's own domain
 * is served (and binds a mandate) only once its owner proved control of it. The attack: project
 * A publishes a test merchant with slug S and domain D; project B creates a live merchant with
 * S and D and publishes; `/m/S`, `S.<discovery domain>` and `Host: D` then served B.
 */

const DISCOVERY = 'pay.example.test';
const MANIFEST = '/.well-known/agentic-checkout.json';
const LIVE_PAY_TO = '0x2222222222222222222222222222222222222222';
const liveMerchant = (o: Record<string, unknown> = {}) => ({ receiving: { x402: { chain: 'base', address: LIVE_PAY_TO } }, rails: ['x402'], ...o });

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

const newSlug = () => `claim-${ulid().toLowerCase().slice(-12)}`;
const proofOf = (m: { domain_verification: ProofInstructions }) => m.domain_verification;

/** The merchant id each agent entry point resolves to (null when it answers 404). */
async function served(slug: string, domain: string) {
  const id = (r: { status: number; body: any }) => (r.status === 200 ? (r.body.merchant.id as string) : r.status === 404 ? null : `HTTP ${r.status}`);
  return {
    path: id(await app.request('GET', `/m/${slug}${MANIFEST}`)),
    discoveryHost: id(await hostRequest(app, 'GET', MANIFEST, `${slug}.${DISCOVERY}`)),
    ownDomain: id(await hostRequest(app, 'GET', MANIFEST, domain)),
  };
}

describe('a slug belongs to one project in both modes', () => {
  it("GIVEN project A's published test merchant with slug S and a verified domain D WHEN project B creates a live merchant with S and D THEN 409 MERCHANT_SLUG_TAKEN, and every agent entry point still serves A's merchant", async () => {
    const slug = newSlug();
    const domain = proofDomain();
    const a = await publishedMerchant(app, { merchant: { slug, domain } });
    await verifyDomainByTxt(app, world, a.key, a.merchant.id);
    const bLive = await app.key('live');

    const taken = await app.request('POST', '/v1/merchants', { key: bLive, body: merchantBody(liveMerchant({ slug, domain })) });
    expectError(taken, 409, 'MERCHANT_SLUG_TAKEN');
    expect(taken.body.error_human).toContain('another project');
    // Nor in A's own mode.
    expectError(await app.request('POST', '/v1/merchants', { key: await app.key('test', { projectId: bLive.projectId }), body: merchantBody({ slug }) }), 409, 'MERCHANT_SLUG_TAKEN');

    // B publishes a live merchant under another slug that claims A's domain: it is not served there.
    const b = await publishedMerchant(app, { key: bLive, merchant: liveMerchant({ domain }) });
    expect(b.merchant).toMatchObject({ domain, domain_status: 'unverified' });
    expect(await served(slug, domain)).toEqual({ path: a.merchant.id, discoveryHost: a.merchant.id, ownDomain: a.merchant.id });
    expect((await hostRequest(app, 'GET', MANIFEST, `${b.merchant.slug}.${DISCOVERY}`)).body.merchant).toEqual({ id: b.merchant.id, name: 'Test Shop', domain, domain_verified: false });

    // B cannot verify it without D's owner publishing B's token, and not even then: A verified it first.
    expectError(await app.request('POST', `/v1/merchants/${b.merchant.id}/domain/verify`, { key: bLive }), 422, 'DOMAIN_VERIFICATION_FAILED');
    world.publishTxt(domain, proofOf(b.merchant as never).dns_txt.value);
    expectError(await app.request('POST', `/v1/merchants/${b.merchant.id}/domain/verify`, { key: bLive }), 409, 'MERCHANT_DOMAIN_TAKEN');
    expect((await app.request('GET', `/v1/merchants/${b.merchant.id}`, { key: bLive })).body.domain_status).toBe('unverified');
    expect(await served(slug, domain)).toEqual({ path: a.merchant.id, discoveryHost: a.merchant.id, ownDomain: a.merchant.id });
  });

  it("GIVEN project A's published live merchant with slug S WHEN project B creates a test merchant with S THEN 409 MERCHANT_SLUG_TAKEN and /m/S stays A's", async () => {
    const slug = newSlug();
    const a = await publishedMerchant(app, { key: await app.key('live'), merchant: liveMerchant({ slug }) });
    for (const mode of ['test', 'live'] as const) {
      const res = await app.request('POST', '/v1/merchants', { key: await app.key(mode), body: merchantBody(mode === 'live' ? liveMerchant({ slug }) : { slug }) });
      expectError(res, 409, 'MERCHANT_SLUG_TAKEN');
    }
    expect((await served(slug, a.merchant.domain)).path).toBe(a.merchant.id);
  });

  it('GIVEN one project WHEN it creates a test and a live merchant with one slug THEN both are created, a third in a used mode is 409, and /m/S names the published live one, else the test one', async () => {
    const slug = newSlug();
    const testSide = await publishedMerchant(app, { merchant: { slug } });
    const liveKey = await app.key('live', { projectId: testSide.key.projectId });
    const live = await app.request('POST', '/v1/merchants', { key: liveKey, body: merchantBody(liveMerchant({ slug })) });
    expect(live.status, live.text).toBe(201);
    const again = await app.request('POST', '/v1/merchants', { key: testSide.key, body: merchantBody({ slug }) });
    expectError(again, 409, 'MERCHANT_SLUG_TAKEN');
    expect(again.body.error_human).toContain('already has a test merchant');
    expect((await app.request('GET', `/m/${slug}${MANIFEST}`)).body.merchant.id).toBe(testSide.merchant.id);
    await app.request('POST', `/v1/catalog?merchant_id=${live.body.id}`, { key: liveKey, body: { sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' } } });
    expect((await app.request('POST', `/v1/publish?merchant_id=${live.body.id}`, { key: liveKey })).status).toBe(200);
    expect((await app.request('GET', `/m/${slug}${MANIFEST}`)).body.merchant.id).toBe(live.body.id);
    expect(await sql(app, 'select project_id from merchant_slugs where slug = ?', [slug])).toEqual([{ project_id: testSide.key.projectId }]);
  });

  it('GIVEN two projects WHEN they create a merchant with the same slug at the same time, one in each mode THEN one is created and the other gets 409 MERCHANT_SLUG_TAKEN, every round', async () => {
    for (let round = 0; round < 8; round++) {
      const slug = newSlug();
      const [testKey, liveKey] = await Promise.all([app.key('test'), app.key('live')]);
      const pair: Array<[TestKey, Record<string, unknown>]> = [
        [testKey, merchantBody({ slug })],
        [liveKey, merchantBody(liveMerchant({ slug }))],
      ];
      const results = await Promise.all((round % 2 ? pair.reverse() : pair).map(([key, body]) => app.request('POST', '/v1/merchants', { key, body })));
      expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join(' | ')).toEqual([201, 409]);
      expectError(results.find((r) => r.status === 409)!, 409, 'MERCHANT_SLUG_TAKEN');
      const winner = results.find((r) => r.status === 201)!.body;
      const rows = await sql<{ project_id: string }>(app, 'select distinct project_id from merchants where slug = ?', [slug]);
      expect(rows).toHaveLength(1);
      expect((await sql(app, 'select project_id from merchant_slugs where slug = ?', [slug]))[0]).toEqual({ project_id: rows[0]!.project_id });
      expect(winner.slug).toBe(slug);
    }
  });
});

describe("a merchant's own domain is served only once verified", () => {
  it('GIVEN a published merchant with an unverified domain WHEN an agent calls that host THEN 404; the API shows it unverified with both proofs to publish', async () => {
    const domain = proofDomain();
    const shop = await publishedMerchant(app, { merchant: { domain } });
    const m = (await app.request('GET', `/v1/merchants/${shop.merchant.id}`, { key: shop.key })).body;
    const token = m.domain_verification.token as string;
    expect(token).toMatch(/^[0-9a-f]{32}$/);
    expect(m).toMatchObject({
      domain,
      domain_status: 'unverified',
      domain_verification: {
        token,
        dns_txt: { name: `_svc-checkout.${domain}`, value: `svc-verify=${token}` },
        https_file: { url: `https://${domain}/.well-known/svc-checkout-verification.txt`, content: `svc-verify=${token}` },
        verified_at: null,
      },
    });
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).status).toBe(404);
    expect((await hostRequest(app, 'GET', '/agent/catalog', domain)).status).toBe(404);
    expect((await app.request('GET', `/m/${shop.merchant.id}${MANIFEST}`)).body.merchant).toEqual({ id: shop.merchant.id, name: 'Test Shop', domain, domain_verified: false });
  });

  it('GIVEN the TXT record published WHEN the owner verifies THEN the domain is verified and served, and the manifest says so', async () => {
    const domain = proofDomain();
    const shop = await publishedMerchant(app, { merchant: { domain } });
    world.publishTxt(domain, 'v=spf1 -all');
    world.publishTxt(domain, proofOf(shop.merchant as never).dns_txt.value);
    const res = await app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.domain_status).toBe('verified');
    expect(Date.parse(res.body.domain_verification.verified_at)).not.toBeNaN();
    const manifest = await hostRequest(app, 'GET', MANIFEST, domain.toUpperCase());
    expect(manifest.status).toBe(200);
    expect(manifest.body.merchant).toEqual({ id: shop.merchant.id, name: 'Test Shop', domain, domain_verified: true });
    // Verifying again changes nothing.
    const again = await app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key });
    expect(again.body.domain_verification.verified_at).toBe(res.body.domain_verification.verified_at);
  });

  it('GIVEN the well-known file served over https and no TXT record WHEN the owner verifies THEN the file is fetched and the domain is verified and served', async () => {
    const domain = proofDomain();
    const shop = await publishedMerchant(app, { merchant: { domain } });
    world.serveFile(domain, `other-service=1\n${proofOf(shop.merchant as never).https_file.content}\n`);
    const res = await app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.domain_status).toBe('verified');
    expect(world.fileRequests).toContain(domain);
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).body.merchant.id).toBe(shop.merchant.id);
  });

  it("GIVEN proofs of another token (another merchant's) WHEN the owner verifies THEN 422 DOMAIN_VERIFICATION_FAILED naming both proofs, and nothing changes", async () => {
    const domain = proofDomain();
    const shop = await publishedMerchant(app, { merchant: { domain } });
    world.publishTxt(domain, `svc-verify=${'0'.repeat(32)}`);
    world.serveFile(domain, `svc-verify=${'1'.repeat(32)}`);
    const res = await app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key });
    expectError(res, 422, 'DOMAIN_VERIFICATION_FAILED');
    expect(res.body.error_human).toContain(`_svc-checkout.${domain}`);
    expect(res.body.error_human).toContain(`https://${domain}/.well-known/svc-checkout-verification.txt`);
    expect((await app.request('GET', `/v1/merchants/${shop.merchant.id}`, { key: shop.key })).body.domain_status).toBe('unverified');
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).status).toBe(404);
  });

  it('GIVEN a verified domain WHEN the owner changes the domain THEN the new one is unverified, the old host is no longer served, and another project may verify the old one', async () => {
    const domain = proofDomain();
    const shop = await publishedMerchant(app, { merchant: { domain } });
    await verifyDomainByTxt(app, world, shop.key, shop.merchant.id);
    const moved = await app.request('PATCH', `/v1/merchants/${shop.merchant.id}`, { key: shop.key, body: { domain: proofDomain() } });
    expect(moved.status, moved.text).toBe(200);
    expect(moved.body).toMatchObject({ domain_status: 'unverified', domain_verification: { verified_at: null } });
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).status).toBe(404);
    expect(await sql(app, 'select project_id from merchant_domains where domain = ?', [domain])).toEqual([]);

    const other = await publishedMerchant(app, { merchant: { domain } });
    await verifyDomainByTxt(app, world, other.key, other.merchant.id);
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).body.merchant.id).toBe(other.merchant.id);
    // The same domain sent again is no change: it stays verified.
    const same = await app.request('PATCH', `/v1/merchants/${other.merchant.id}`, { key: other.key, body: { domain } });
    expect(same.body.domain_status).toBe('verified');
  });

  it('GIVEN one project with a test and a live merchant on one verified domain WHEN an agent calls the host THEN the published live merchant answers, else the test one', async () => {
    const domain = proofDomain();
    const testSide = await publishedMerchant(app, { merchant: { domain } });
    await verifyDomainByTxt(app, world, testSide.key, testSide.merchant.id);
    const liveKey = await app.key('live', { projectId: testSide.key.projectId });
    const live = await app.request('POST', '/v1/merchants', { key: liveKey, body: merchantBody(liveMerchant({ domain })) });
    await verifyDomainByTxt(app, world, liveKey, live.body.id);
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).body.merchant.id).toBe(testSide.merchant.id);
    await app.request('POST', `/v1/catalog?merchant_id=${live.body.id}`, { key: liveKey, body: { sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' } } });
    expect((await app.request('POST', `/v1/publish?merchant_id=${live.body.id}`, { key: liveKey })).status).toBe(200);
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).body.merchant.id).toBe(live.body.id);
  });

  it('GIVEN two projects that both show a proof for one domain WHEN they verify at the same time THEN one is verified and the other gets 409 MERCHANT_DOMAIN_TAKEN, every round', async () => {
    for (let round = 0; round < 4; round++) {
      const domain = proofDomain();
      const shops = await Promise.all([publishedMerchant(app, { merchant: { domain } }), publishedMerchant(app, { key: await app.key('live'), merchant: liveMerchant({ domain }) })]);
      for (const shop of shops) world.publishTxt(domain, proofOf(shop.merchant as never).dns_txt.value);
      const results = await Promise.all(shops.map((shop) => app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key })));
      expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join(' | ')).toEqual([200, 409]);
      expectError(results.find((r) => r.status === 409)!, 409, 'MERCHANT_DOMAIN_TAKEN');
      const winner = shops[results.findIndex((r) => r.status === 200)]!;
      expect((await hostRequest(app, 'GET', MANIFEST, domain)).body.merchant.id).toBe(winner.merchant.id);
      expect(await sql(app, 'select project_id from merchant_domains where domain = ?', [domain])).toEqual([{ project_id: winner.key.projectId }]);
    }
  });

  it('GIVEN a domain under the discovery domain WHEN the owner verifies THEN 422 DOMAIN_VERIFICATION_FAILED without looking anything up', async () => {
    const shop = await publishedMerchant(app, { merchant: { domain: `x.${newSlug()}.${DISCOVERY}` } });
    const res = await app.request('POST', `/v1/merchants/${shop.merchant.id}/domain/verify`, { key: shop.key });
    expectError(res, 422, 'DOMAIN_VERIFICATION_FAILED');
    expect(res.body.error_human).toContain('discovery domain');
  });

  it("GIVEN a live merchant whose domain resolves to a loopback address serving a valid file WHEN the owner verifies THEN the SSRF guard refuses the connection: 422 and the server is never asked", async () => {
    const domain = proofDomain();
    const live = await publishedMerchant(app, { key: await app.key('live'), merchant: liveMerchant({ domain }) });
    world.serveFile(domain, proofOf(live.merchant as never).https_file.content, '127.0.0.1');
    expectError(await app.request('POST', `/v1/merchants/${live.merchant.id}/domain/verify`, { key: live.key }), 422, 'DOMAIN_VERIFICATION_FAILED');
    expect(world.fileRequests).not.toContain(domain);
  });
});

describe('domain verification in production', () => {
  let prod: TestApp;
  beforeAll(async () => {
    prod = await TestApp.start({ NODE_ENV: 'production', SVC_PUBLIC_BASE_URL: 'https://checkout.example.com' });
    world.install(prod);
  });
  afterAll(async () => prod?.stop());

  it('GIVEN a test merchant whose domain resolves to a private or loopback address serving a valid file WHEN the owner verifies in production THEN the SSRF guard refuses it: 422 and the server is never asked', async () => {
    for (const address of ['127.0.0.1', '10.0.0.7', '169.254.169.254']) {
      const domain = proofDomain();
      const key = await prod.key('test');
      const m = await prod.request('POST', '/v1/merchants', { key, body: merchantBody({ domain }) });
      expect(m.status, m.text).toBe(201);
      world.serveFile(domain, proofOf(m.body).https_file.content, address);
      const res = await prod.request('POST', `/v1/merchants/${m.body.id}/domain/verify`, { key });
      expectError(res, 422, 'DOMAIN_VERIFICATION_FAILED');
      expect(res.body.error_human).not.toMatch(/ECONNREFUSED|private|loopback|127\.0\.0\.1|10\.0\.0\.7|169\.254/);
      expect(world.fileRequests).not.toContain(domain);
    }
  });
});
