import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { publishedMerchant } from './helpers/agent.js';
import { etagOf, hostRequest } from './helpers/agent-protocol.js';
import { cacheServing, statementsDuring, until } from './helpers/agent-cache.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { DomainProofWorld, verifyDomainByTxt } from './helpers/domain-proof.js';

const MANIFEST = '/.well-known/agentic-checkout.json';
const DISCOVERY = 'pay.example.test';

let app: TestApp;
let key: TestKey;
let merchant: { id: string; slug: string; domain: string };
let base: string;
let q: string;
let world: DomainProofWorld;
beforeAll(async () => {
  app = await TestApp.start({ SVC_DISCOVERY_DOMAIN: DISCOVERY });
  world = await DomainProofWorld.start();
  world.install(app);
  ({ key, merchant, base } = await publishedMerchant(app));
  await verifyDomainByTxt(app, world, key, merchant.id);
  q = `?merchant_id=${merchant.id}`;
  await cacheServing(app, () => app.request('GET', `${base}${MANIFEST}`));
});
afterAll(async () => {
  await app?.stop();
  await world?.close();
});

const manifest = (headers: Record<string, string> = {}) => app.request('GET', `${base}${MANIFEST}`, { headers });
const catalog = () => app.request('GET', `${base}/agent/catalog`);

/** Fetches once (a miss fills the cache) and proves the next fetch runs no SQL; returns that response. */
async function warm<T>(read: () => Promise<T>): Promise<T> {
  await read();
  const { result, statements } = await statementsDuring(app, read);
  expect(statements).toEqual([]);
  return result;
}

describe('agent reads served from the cache', () => {
  it('GIVEN a published merchant WHEN the manifest, a 304 revalidation, the catalog and the key set are fetched again THEN they run no SQL and serve the same bytes', async () => {
    const first = await warm(() => manifest());
    expect(first.status).toBe(200);
    expect(first.headers.get('etag')).toBe(etagOf(first.text));
    const again = await warm(() => manifest());
    expect(again.text).toBe(first.text);

    const notModified = await warm(() => manifest({ 'if-none-match': first.headers.get('etag')! }));
    expect(notModified.status).toBe(304);
    expect(notModified.text).toBe('');

    const items = await warm(catalog);
    expect(items.status).toBe(200);
    expect(items.body.items.map((i: any) => i.sku).sort()).toEqual(['beans', 'coffee']);

    const jwks = await warm(() => app.request('GET', `${base}/.well-known/jwks.json`));
    expect(jwks.body.keys[0].kid).toBe(`${merchant.id}-receipts-v1`);

    // By slug, on the discovery host and on the merchant's own domain (host routing cached too).
    expect((await warm(() => app.request('GET', `/m/${merchant.slug}${MANIFEST}`))).body.merchant.id).toBe(merchant.id);
    expect((await warm(() => hostRequest(app, 'GET', MANIFEST, `${merchant.slug}.${DISCOVERY}`))).body.merchant.id).toBe(merchant.id);
    expect((await warm(() => hostRequest(app, 'GET', '/agent/catalog', merchant.domain))).body.items).toHaveLength(2);
  });

  it('GIVEN an unknown or unpublished merchant WHEN it is asked for twice THEN both are 404 (a miss is never cached as an answer)', async () => {
    const other = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
    for (const ref of [other.body.id, other.body.slug, `mrch_${ulid().toLowerCase()}`]) {
      expect((await app.request('GET', `/m/${ref}${MANIFEST}`)).status).toBe(404);
      expect((await app.request('GET', `/m/${ref}${MANIFEST}`)).status).toBe(404);
    }
    // Publishing makes it visible at once.
    await app.request('POST', `/v1/catalog?merchant_id=${other.body.id}`, { key, body: { sku: 'x', name: 'X', price: { amount: '1.00', currency: 'USD' } } });
    expect((await app.request('POST', `/v1/publish?merchant_id=${other.body.id}`, { key })).status).toBe(200);
    expect((await app.request('GET', `/m/${other.body.slug}${MANIFEST}`)).body.merchant.id).toBe(other.body.id);
  });
});

/**
 * Every write that changes what the manifest or the catalog shows, through the same app: the
 * next read (no wait at all) shows it. `seen` reads the manifest and the catalog.
 */
type Seen = { manifest: any; catalog: any; etag: string };
const WRITES: Array<{ what: string; write: () => Promise<{ status: number; text: string }>; shows: (s: Seen) => boolean }> = [
  {
    what: 'a catalog item created',
    write: () => app.request('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '3.00', currency: 'USD' } } }),
    shows: (s) => s.catalog.items.some((i: any) => i.sku === 'tea') && s.manifest.paid_resources.some((r: any) => r.sku === 'tea'),
  },
  {
    what: 'a catalog item updated',
    write: () => app.request('PATCH', `/v1/catalog/tea${q}`, { key, body: { name: 'Green tea', price: { amount: '3.25', currency: 'USD' } } }),
    shows: (s) => s.catalog.items.some((i: any) => i.name === 'Green tea') && s.manifest.paid_resources.some((r: any) => r.price.amount === '3.25'),
  },
  {
    what: 'a catalog item made unavailable',
    write: () => app.request('PATCH', `/v1/catalog/tea${q}`, { key, body: { available: false } }),
    shows: (s) => !s.catalog.items.some((i: any) => i.sku === 'tea') && !s.manifest.paid_resources.some((r: any) => r.sku === 'tea'),
  },
  {
    what: 'a catalog item deleted',
    write: () => app.request('DELETE', `/v1/catalog/beans${q}`, { key }),
    shows: (s) => !s.catalog.items.some((i: any) => i.sku === 'beans'),
  },
  {
    what: 'receiving changed',
    write: () =>
      app.request('PUT', `/v1/receiving${q}`, {
        key,
        body: { receiving: { x402: { chain: 'base-sepolia', address: '0x3333333333333333333333333333333333333333' }, mock: { account: 'acct_test' } } },
      }),
    shows: (s) => s.manifest.pay_to.x402.address === '0x3333333333333333333333333333333333333333',
  },
  {
    what: 'the merchant renamed',
    write: () => app.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { name: 'Renamed Shop' } }),
    shows: (s) => s.manifest.merchant.name === 'Renamed Shop',
  },
  {
    what: 'the rails changed',
    write: () => app.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { rails: ['x402'] } }),
    shows: (s) => JSON.stringify(s.manifest.rails) === '["x402"]' && s.manifest.pay_to.mock === undefined,
  },
  {
    what: 'a new policy published',
    write: async () => {
      const put = await app.request('PUT', `/v1/policy${q}`, { key, body: { body: { maxPerTransactionUsd: 77 } } });
      expect(put.status).toBe(201);
      return app.request('POST', `/v1/publish${q}`, { key });
    },
    shows: (s) => s.manifest.policy_summary.max_per_transaction_usd === 77,
  },
];

async function seen(): Promise<Seen> {
  const [m, c] = [await manifest(), await catalog()];
  expect(m.status).toBe(200);
  return { manifest: m.body, catalog: c.body, etag: m.headers.get('etag')! };
}

describe('a write is visible to the next read in the same process', () => {
  for (const w of WRITES) {
    it(`GIVEN a warm cache WHEN ${w.what} THEN the very next manifest and catalog show it, under a new ETag`, async () => {
      await warm(manifest);
      await warm(catalog);
      const before = await seen();
      expect(w.shows(before)).toBe(false);
      const res = await w.write();
      expect(res.status, res.text).toBeLessThan(300);
      const after = await seen();
      expect(w.shows(after)).toBe(true);
      expect(after.etag).not.toBe(before.etag);
      // The old validator no longer matches.
      expect((await manifest({ 'if-none-match': before.etag })).status).toBe(200);
      // And the new state is cached again.
      await warm(manifest);
    });
  }

  it('GIVEN a warm cache WHEN a write fails and rolls back THEN the cache stays warm (no SQL on the next read)', async () => {
    await warm(manifest);
    const dup = await app.request('POST', `/v1/catalog${q}`, { key, body: { sku: 'coffee', name: 'Again', price: { amount: '1.00', currency: 'USD' } } });
    expect(dup.status).toBe(409);
    const { statements } = await statementsDuring(app, manifest);
    expect(statements).toEqual([]);
  });

  it("GIVEN a warm host route WHEN the merchant's domain changes THEN the old domain stops routing to it, and the new one routes at once when verified", async () => {
    const { key: k, merchant: m } = await publishedMerchant(app);
    await verifyDomainByTxt(app, world, k, m.id);
    expect((await warm(() => hostRequest(app, 'GET', MANIFEST, m.domain))).body.merchant.id).toBe(m.id);
    const domain = `moved-${ulid().toLowerCase().slice(-8)}.example.com`;
    expect((await app.request('PATCH', `/v1/merchants/${m.id}`, { key: k, body: { domain } })).status).toBe(200);
    expect((await hostRequest(app, 'GET', MANIFEST, m.domain)).status).toBe(404);
    expect((await hostRequest(app, 'GET', MANIFEST, domain)).status).toBe(404);
    await verifyDomainByTxt(app, world, k, m.id);
    const moved = await hostRequest(app, 'GET', MANIFEST, domain);
    expect(moved.body.merchant).toEqual({ id: m.id, name: 'Test Shop', domain, domain_verified: true });
  });

  it('GIVEN a slug cached for the test merchant WHEN the live merchant with the same slug publishes THEN the slug names the live one at once', async () => {
    const slug = `cache-${ulid().toLowerCase().slice(-10)}`;
    const test = await publishedMerchant(app, { merchant: { slug } });
    expect((await warm(() => app.request('GET', `/m/${slug}${MANIFEST}`))).body.merchant.id).toBe(test.merchant.id);
    // The same project's live merchant (a slug belongs to one project).
    const live = await publishedMerchant(app, {
      key: await app.key('live', { projectId: test.key.projectId }),
      merchant: { slug, receiving: { x402: { chain: 'base', address: '0x2222222222222222222222222222222222222222' } }, rails: ['x402'] },
    });
    const now = await app.request('GET', `/m/${slug}${MANIFEST}`);
    expect(now.body.merchant.id).toBe(live.merchant.id);
    expect(now.body.livemode).toBe(true);
    expect((await app.request('GET', `/m/${slug}/agent/catalog`)).status).toBe(200);
  });
});

describe('request logs of the agent reads', () => {
  it('GIVEN the default info level WHEN agents read the manifest, key set and catalog THEN no request line is logged for them, while errors, writes and other reads still are, with their request id; at debug they are logged too', async () => {
    const lines: Array<Record<string, any>> = [];
    const sink = new Writable({
      write(chunk, _enc, cb) {
        lines.push(JSON.parse(chunk.toString()));
        cb();
      },
    });
    const logged = await TestApp.start({}, { log: pino({ level: 'info' }, sink) });
    try {
      const { key: k, base: b } = await publishedMerchant(logged);
      const requests = () => lines.filter((l) => l.msg === 'request');
      lines.length = 0;
      const reads = [await logged.request('GET', `${b}${MANIFEST}`), await logged.request('GET', `${b}/agent/catalog`), await logged.request('GET', `${b}/.well-known/jwks.json`)];
      expect(reads.map((r) => r.status)).toEqual([200, 200, 200]);
      const missing = await logged.request('GET', `/m/no-such-shop${MANIFEST}`);
      const write = await logged.request('POST', `/v1/catalog?merchant_id=${b.slice(3)}`, { key: k, body: { sku: 'log', name: 'L', price: { amount: '1.00', currency: 'USD' } } });
      const list = await logged.request('GET', `/v1/catalog?merchant_id=${b.slice(3)}`, { key: k });
      // the line of a request is written when its response finishes: wait for the last one's
      await until('the catalog list logged', async () => requests(), (r) => r.some((l) => l.request_id === list.headers.get('request-id')));
      expect(requests().map((l) => [l.method, l.status, l.request_id])).toEqual([
        ['GET', 404, missing.headers.get('request-id')],
        ['POST', 201, write.headers.get('request-id')],
        ['GET', 200, list.headers.get('request-id')],
      ]);
      // Every response still carries its Request-Id.
      for (const r of reads) expect(r.headers.get('request-id')).toMatch(/^req_[0-9a-z]{26}$/);

      logged.services.log.level = 'debug';
      lines.length = 0;
      const debugRead = await logged.request('GET', `${b}${MANIFEST}`);
      await until('the debug read logged', async () => requests(), (r) => r.length > 0);
      expect(requests().map((l) => [l.level, l.status, l.request_id])).toEqual([[20, 200, debugRead.headers.get('request-id')]]);
    } finally {
      await logged.stop();
    }
  });
});
