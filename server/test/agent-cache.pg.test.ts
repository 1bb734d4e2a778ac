import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { publishedMerchant } from './helpers/agent.js';
import { hostRequest } from './helpers/agent-protocol.js';
import { cacheServing, statementsDuring, until } from './helpers/agent-cache.js';
import { sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { DomainProofWorld, verifyDomainByTxt } from './helpers/domain-proof.js';

/**
 * Two server processes (A writes, B reads) on one PostgreSQL database: B serves the agent
 * reads from its cache with no SQL, and every kind of write through A reaches B through the
 * triggers' NOTIFY. The waits below are barriers (poll until B shows the write), never
 * timed assertions: the bound is the NOTIFY delivery delay (modules/agent/cache.ts).
 */

const MANIFEST = '/.well-known/agentic-checkout.json';

let a: TestApp;
let b: TestApp;
let key: TestKey;
let merchant: { id: string; slug: string; domain: string };
let base: string;
let q: string;
let world: DomainProofWorld;
beforeAll(async () => {
  a = await TestApp.start();
  b = await TestApp.start({ SVC_MASTER_KEY: a.config.SVC_MASTER_KEY! }, { target: a.target });
  world = await DomainProofWorld.start();
  world.install(a);
  ({ key, merchant, base } = await publishedMerchant(a));
  await verifyDomainByTxt(a, world, key, merchant.id);
  q = `?merchant_id=${merchant.id}`;
  await cacheServing(a, () => a.request('GET', `${base}${MANIFEST}`));
  await cacheServing(b, () => b.request('GET', `${base}${MANIFEST}`));
});
afterAll(async () => {
  await b?.stop();
  await a?.stop();
  await world?.close();
});

const manifestOn = (app: TestApp, headers: Record<string, string> = {}) => app.request('GET', `${base}${MANIFEST}`, { headers });
const catalogOn = (app: TestApp) => app.request('GET', `${base}/agent/catalog`);

/**
 * Reads on B until a read runs no SQL on B (a barrier; it fails after its deadline if B never
 * caches). Not "the second read": a NOTIFY of A's last writes may reach B while its first
 * read runs, and that read then stores nothing, by design (modules/agent/cache.ts epochs).
 */
async function warmOnB<T>(read: () => Promise<T>): Promise<T> {
  const served = await until('a read on B that runs no SQL', () => statementsDuring(b, read), (r) => r.statements.length === 0);
  return served.result;
}

type Seen = { manifest: any; catalog: any };
async function seenOnB(): Promise<Seen> {
  const [m, c] = [await manifestOn(b), await catalogOn(b)];
  return { manifest: m.body, catalog: c.body };
}

describe('process B serves from its cache', () => {
  it('GIVEN a manifest and catalog read once on B WHEN they are read again, and revalidated THEN B runs no SQL', async () => {
    const m = await warmOnB(() => manifestOn(b));
    expect(m.status).toBe(200);
    const notModified = await warmOnB(() => manifestOn(b, { 'if-none-match': m.headers.get('etag')! }));
    expect(notModified.status).toBe(304);
    expect((await warmOnB(() => catalogOn(b))).body.items).toHaveLength(2);
    expect((await warmOnB(() => hostRequest(b, 'GET', MANIFEST, merchant.domain))).body.merchant.id).toBe(merchant.id);
  });
});

const WRITES: Array<{ what: string; write: () => Promise<{ status: number; text: string }>; shows: (s: Seen) => boolean }> = [
  {
    what: 'a catalog item created',
    write: () => a.request('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '3.00', currency: 'USD' } } }),
    shows: (s) => s.catalog.items.some((i: any) => i.sku === 'tea') && s.manifest.paid_resources.some((r: any) => r.sku === 'tea'),
  },
  {
    what: 'a catalog item updated',
    write: () => a.request('PATCH', `/v1/catalog/tea${q}`, { key, body: { name: 'Green tea', price: { amount: '3.25', currency: 'USD' } } }),
    shows: (s) => s.catalog.items.some((i: any) => i.name === 'Green tea') && s.manifest.paid_resources.some((r: any) => r.price.amount === '3.25'),
  },
  {
    what: 'a catalog item deleted',
    write: () => a.request('DELETE', `/v1/catalog/tea${q}`, { key }),
    shows: (s) => !s.catalog.items.some((i: any) => i.sku === 'tea') && !s.manifest.paid_resources.some((r: any) => r.sku === 'tea'),
  },
  {
    what: 'receiving changed',
    write: () =>
      a.request('PUT', `/v1/receiving${q}`, {
        key,
        body: { receiving: { x402: { chain: 'base-sepolia', address: '0x3333333333333333333333333333333333333333' }, mock: { account: 'acct_test' } } },
      }),
    shows: (s) => s.manifest.pay_to.x402.address === '0x3333333333333333333333333333333333333333',
  },
  {
    what: 'the merchant renamed',
    write: () => a.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { name: 'Renamed Shop' } }),
    shows: (s) => s.manifest.merchant.name === 'Renamed Shop',
  },
  {
    what: 'the rails changed',
    write: () => a.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { rails: ['x402'] } }),
    shows: (s) => JSON.stringify(s.manifest.rails) === '["x402"]',
  },
  {
    what: 'a new policy published',
    write: async () => {
      expect((await a.request('PUT', `/v1/policy${q}`, { key, body: { body: { maxPerTransactionUsd: 77 } } })).status).toBe(201);
      return a.request('POST', `/v1/publish${q}`, { key });
    },
    shows: (s) => s.manifest.policy_summary.max_per_transaction_usd === 77,
  },
  {
    // Not through the API at all: the triggers see raw SQL too.
    what: 'a catalog price changed by raw SQL',
    write: async () => {
      await sql(a, `update catalog_items set price_amount = '9.99' where merchant_id = ? and sku = 'coffee'`, [merchant.id]);
      return { status: 200, text: '' };
    },
    shows: (s) => s.catalog.items.some((i: any) => i.sku === 'coffee' && i.price.amount === '9.99'),
  },
];

describe('a write through process A reaches process B', () => {
  for (const w of WRITES) {
    it(`GIVEN B's cache warm WHEN ${w.what} through A THEN B shows it (after the NOTIFY) and caches the new state`, async () => {
      await warmOnB(() => manifestOn(b));
      await warmOnB(() => catalogOn(b));
      expect(w.shows(await seenOnB())).toBe(false);
      const res = await w.write();
      expect(res.status, res.text).toBeLessThan(300);
      await until(`${w.what} on B`, seenOnB, w.shows);
      // A, the writer, shows it with no wait at all.
      expect(w.shows({ manifest: (await manifestOn(a)).body, catalog: (await catalogOn(a)).body })).toBe(true);
      // Once seen, B never goes back: it is cached again, and stays.
      const again = await warmOnB(seenOnB);
      expect(w.shows(again)).toBe(true);
    });
  }

  it('GIVEN the test merchant cached by slug on B WHEN the live merchant with that slug publishes through A THEN B resolves the slug to it', async () => {
    const slug = `pgc-${ulid().toLowerCase().slice(-10)}`;
    const test = await publishedMerchant(a, { merchant: { slug } });
    expect((await warmOnB(() => b.request('GET', `/m/${slug}${MANIFEST}`))).body.merchant.id).toBe(test.merchant.id);
    const live = await publishedMerchant(a, {
      key: await a.key('live', { projectId: test.key.projectId }),
      merchant: { slug, receiving: { x402: { chain: 'base', address: '0x2222222222222222222222222222222222222222' } }, rails: ['x402'] },
    });
    await until('the live merchant behind the slug on B', () => b.request('GET', `/m/${slug}${MANIFEST}`), (r) => r.body.merchant.id === live.merchant.id);
  });
});

describe("B's listening session", () => {
  it('GIVEN B loses its listening connection WHEN A writes meanwhile THEN B reads through (never stale) and caches again once it listens again', async () => {
    await warmOnB(() => manifestOn(b));
    // Every listening session of this database (A's and B's) is killed, as a network cut would.
    await sql(a, `select pg_terminate_backend(pid) from pg_stat_activity where datname = current_database() and application_name like 'svc-checkout listen %'`);
    await until('B noticing the lost listener', async () => b.services.caches.agent.listening, (up) => !up);

    // While B cannot hear NOTIFY, a write lands: B must not serve its cached manifest. Whether
    // B is still reconnecting (it reads through) or already listens again (it dropped
    // everything it had when LISTEN came back), the next read goes to the database.
    expect((await a.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { name: 'While deaf' } })).status).toBe(200);
    const { result, statements } = await statementsDuring(b, () => manifestOn(b));
    expect(result.body.merchant.name).toBe('While deaf');
    expect(statements.length).toBeGreaterThan(0);

    await until('B listening again', async () => b.services.caches.agent.listening, Boolean);
    expect((await warmOnB(() => manifestOn(b))).body.merchant.name).toBe('While deaf');
    // And invalidation works on the new session.
    expect((await a.request('PATCH', `/v1/merchants/${merchant.id}`, { key, body: { name: 'Heard again' } })).status).toBe(200);
    await until('the rename on B after the reconnect', () => manifestOn(b), (r) => r.body.merchant.name === 'Heard again');
  });
});
