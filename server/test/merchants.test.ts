import { createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configVersion, expectError, racePastRowLock, sql } from './helpers/foundation.js';
import { merchantBody, TEST_PAY_TO, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let testKey: TestKey;
let liveKey: TestKey;
beforeAll(async () => {
  app = await TestApp.start();
  testKey = await app.key('test');
  liveKey = await app.key('live', { projectId: testKey.projectId });
});
afterAll(async () => app?.stop());

const LIVE_PAY_TO = '0x2222222222222222222222222222222222222222';
const liveBody = (o: Record<string, unknown> = {}) => merchantBody({ receiving: { x402: { chain: 'base', address: LIVE_PAY_TO } }, ...o });
// A real address whose EIP-55 form mixes cases (USDC on base).
const LOWER = '0x833589fcd6edb6e08f4c7c32d4f71b54bda02913';
const CHECKSUMMED = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';

async function create(key: TestKey, body: Record<string, unknown> = key.mode === 'live' ? liveBody() : merchantBody()) {
  const res = await app.request('POST', '/v1/merchants', { key, body });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

describe('POST /v1/merchants', () => {
  it('GIVEN a test key WHEN creating a merchant THEN 201 with every field of section 2.1', async () => {
    const key = await app.key('test');
    const body = merchantBody({ domain: 'Shop.Example.COM', trusted_svc_jwks_url: 'https://issuer.example.com/jwks.json' });
    const res = await app.request('POST', '/v1/merchants', { key, body });
    expect(res.status, res.text).toBe(201);
    const m = res.body;
    expect(m.id).toMatch(/^mrch_[0-9a-z]{26}$/);
    expect(m.slug).toBe(body.slug);
    expect(m.name).toBe('Test Shop');
    expect(m.domain).toBe('shop.example.com');
    expect(m.domain_status).toBe('unverified');
    expect(m.receiving).toEqual({
      x402: { chain: 'base-sepolia', address: TEST_PAY_TO, asset: 'USDC' },
      mock: { account: 'acct_test' },
    });
    expect(m.rails).toEqual(['x402', 'mock']);
    expect(m.receipt_kid).toBe(`${m.id}-receipts-v1`);
    expect(m.receipt_pub_jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519', kid: m.receipt_kid });
    expect(m.receipt_pub_jwk.x).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(m.receipt_pub_jwk.d).toBeUndefined();
    expect(m.trusted_svc_jwks_url).toBe('https://issuer.example.com/jwks.json');
    expect(m.livemode).toBe(false);
    expect(m.is_default).toBe(true);
    expect(new Date(m.created_at).toISOString()).toBe(m.created_at);
    expect(new Date(m.updated_at).toISOString()).toBe(m.updated_at);
    expect(Object.keys(m).sort()).toEqual(
      [
        'id', 'slug', 'name', 'domain', 'domain_status', 'domain_verification', 'receiving', 'rails', 'receipt_kid', 'receipt_pub_jwk',
        'trusted_svc_jwks_url', 'trusted_ap2_issuers', 'livemode', 'is_default', 'created_at', 'updated_at',
      ].sort(),
    );
  });

  it('GIVEN a live key WHEN creating a merchant THEN livemode is true and the default rails leave out mock', async () => {
    const key = await app.key('live');
    const m = await create(key, liveBody());
    expect(m.livemode).toBe(true);
    expect(m.rails).toEqual(['x402']);
    expect(m.receiving).toEqual({ x402: { chain: 'base', address: LIVE_PAY_TO, asset: 'USDC' } });
    expect(m.trusted_svc_jwks_url).toBeNull();
  });

  it('GIVEN explicit rails WHEN creating THEN they are kept as given', async () => {
    const key = await app.key('test');
    const m = await create(key, merchantBody({ rails: ['mock'] }));
    expect(m.rails).toEqual(['mock']);
  });

  it('GIVEN a project WHEN creating two merchants per mode THEN only the first in each mode is the default', async () => {
    const key = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    const first = await create(key);
    const second = await create(key);
    expect(first.is_default).toBe(true);
    expect(second.is_default).toBe(false);
    // Live mode has its own default.
    expect((await create(live)).is_default).toBe(true);
    expect((await create(live)).is_default).toBe(false);
    // Resolved default: routes without merchant_id act on the first merchant.
    const r = await app.request('GET', '/v1/receiving', { key });
    expect(r.status).toBe(200);
    expect(r.body.receiving).toEqual(first.receiving);
    expect((await app.request('GET', `/v1/merchants/${first.id}`, { key })).body.is_default).toBe(true);
  });

  it('GIVEN a new project WHEN six merchants are created at once THEN all succeed and exactly one is the default', async () => {
    const key = await app.key('test');
    const results = await Promise.all(Array.from({ length: 6 }, () => app.request('POST', '/v1/merchants', { key, body: merchantBody() })));
    for (const r of results) expect(r.status, r.text).toBe(201);
    expect(results.filter((r) => r.body.is_default)).toHaveLength(1);
    const rows = await sql(app, 'select count(*)::int as n from merchants where project_id = ? and is_default', [key.projectId]);
    expect(Number(rows[0]!.n)).toBe(1);
  });

  it('GIVEN one slug WHEN six creates race for it THEN exactly one wins and the rest are 409 MERCHANT_SLUG_TAKEN', async () => {
    const body = merchantBody();
    const keys = await Promise.all(Array.from({ length: 3 }, () => app.key('test')));
    const results = await Promise.all(Array.from({ length: 6 }, (_, i) => app.request('POST', '/v1/merchants', { key: keys[i % 3]!, body })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'MERCHANT_SLUG_TAKEN');
  });

  it('GIVEN a missing slug, name or domain WHEN creating THEN 400 VALIDATION_FAILED naming the field', async () => {
    for (const field of ['slug', 'name', 'domain', 'receiving']) {
      const body: Record<string, unknown> = merchantBody();
      delete body[field];
      const res = await app.request('POST', '/v1/merchants', { key: testKey, body });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain(field);
    }
  });

  it('GIVEN invalid values WHEN creating THEN 400 VALIDATION_FAILED naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ rails: ['bitcoin'] }, 'rails'],
      [{ rails: [] }, 'rails'],
      [{ rails: ['x402', 'x402'] }, 'rails'],
      [{ rails: 'x402' }, 'rails'],
      [{ slug: 'Not A Slug' }, 'slug'],
      [{ slug: '-edge' }, 'slug'],
      [{ name: '' }, 'name'],
      [{ name: 42 }, 'name'],
      [{ domain: 'no spaces.com' }, 'domain'],
      [{ trusted_svc_jwks_url: 'ftp://x.example.com' }, 'trusted_svc_jwks_url'],
      [{ livemode: true }, 'livemode'],
      [{ receiving: 'x402' }, 'receiving'],
    ];
    for (const [override, field] of cases) {
      const res = await app.request('POST', '/v1/merchants', { key: testKey, body: merchantBody(override) });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, JSON.stringify(override)).toContain(field);
    }
  });

  it('GIVEN a slug in use WHEN creating again THEN 409 MERCHANT_SLUG_TAKEN in that mode and for other projects in either mode, but the project\'s other mode may reuse it', async () => {
    const body = merchantBody();
    await create(testKey, body);
    expectError(await app.request('POST', '/v1/merchants', { key: testKey, body: merchantBody({ slug: body.slug }) }), 409, 'MERCHANT_SLUG_TAKEN');
    // A slug belongs to one project (merchant_slugs): another project collides in both modes.
    const other = await app.key('test');
    expectError(await app.request('POST', '/v1/merchants', { key: other, body: merchantBody({ slug: body.slug }) }), 409, 'MERCHANT_SLUG_TAKEN');
    expectError(await app.request('POST', '/v1/merchants', { key: await app.key('live', { projectId: other.projectId }), body: liveBody({ slug: body.slug }) }), 409, 'MERCHANT_SLUG_TAKEN');
    const live = await create(liveKey, liveBody({ slug: body.slug }));
    expect(live.slug).toBe(body.slug);
    expect(live.livemode).toBe(true);
  });
});

describe('receiving validation (POST, PATCH, PUT /v1/receiving)', () => {
  const addr = TEST_PAY_TO;
  const testCases: Array<[string, unknown]> = [
    ['RECEIVING_RAIL_UNKNOWN', { paypal: { email: 'a@b.c' } }],
    ['RECEIVING_RAIL_UNKNOWN', { x402: { chain: 'base-sepolia', address: addr }, venmo: { user: 'x' } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { chain: 'base-sepolia' } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { chain: 'base-sepolia', address: '0xZZ11111111111111111111111111111111111111' } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { chain: 'base-sepolia', address: '0x1234' } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { chain: 'base-sepolia', address: '1111111111111111111111111111111111111111' } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { chain: 'base-sepolia', address: 12345 } }],
    ['RECEIVING_ADDRESS_INVALID', { x402: { address: addr } }],
    ['RECEIVING_ADDRESS_INVALID', { mock: {} }],
    ['RECEIVING_ADDRESS_INVALID', { mock: 'acct' }],
    ['RECEIVING_ADDRESS_INVALID', { card: { processor: 'stripe' } }],
    ['RECEIVING_CHAIN_UNSUPPORTED', { x402: { chain: 'ethereum', address: addr } }],
    ['RECEIVING_CHAIN_UNSUPPORTED', { x402: { chain: 'base', address: addr } }], // a test merchant never reaches a real chain
    ['RECEIVING_ASSET_UNKNOWN', { x402: { chain: 'base-sepolia', address: addr, asset: 'DAI' } }],
    ['RECEIVING_ASSET_UNKNOWN', { x402: { chain: 'base-sepolia', address: addr, asset: 7 } }],
    ['RECEIVING_NO_RAIL_ENABLED', {}],
  ];
  const liveCases: Array<[string, unknown]> = [
    ['RECEIVING_MOCK_IN_LIVE', { mock: { account: 'acct_live' } }],
    ['RECEIVING_MOCK_IN_LIVE', { x402: { chain: 'base', address: LIVE_PAY_TO }, mock: { account: 'acct_live' } }],
    ['RECEIVING_CHAIN_UNSUPPORTED', { x402: { chain: 'base-sepolia', address: LIVE_PAY_TO } }],
  ];

  it('GIVEN a bad receiving object WHEN POST /v1/merchants THEN 400 with its RECEIVING_* code and nothing is created', async () => {
    const key = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    for (const [code, receiving] of testCases) {
      const res = await app.request('POST', '/v1/merchants', { key, body: merchantBody({ receiving }) });
      expectError(res, 400, code);
    }
    for (const [code, receiving] of liveCases) {
      expectError(await app.request('POST', '/v1/merchants', { key: live, body: liveBody({ receiving }) }), 400, code);
    }
    expectError(await app.request('POST', '/v1/merchants', { key: live, body: liveBody({ rails: ['x402', 'mock'] }) }), 400, 'RECEIVING_MOCK_IN_LIVE');
    expect((await app.request('GET', '/v1/merchants', { key })).body.data).toEqual([]);
    expect((await app.request('GET', '/v1/merchants', { key: live })).body.data).toEqual([]);
  });

  it('GIVEN a bad receiving object WHEN PATCH /v1/merchants/:id or PUT /v1/receiving THEN 400 with the same code and the config is unchanged', async () => {
    const key = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    const tm = await create(key);
    const lm = await create(live);
    const run = async (k: TestKey, m: { id: string; receiving: unknown }, code: string, receiving: unknown) => {
      expectError(await app.request('PATCH', `/v1/merchants/${m.id}`, { key: k, body: { receiving } }), 400, code);
      expectError(await app.request('PUT', `/v1/receiving?merchant_id=${m.id}`, { key: k, body: { receiving } }), 400, code);
      // PUT without merchant_id acts on the default merchant, which is this one.
      expectError(await app.request('PUT', '/v1/receiving', { key: k, body: { receiving } }), 400, code);
      const now = await app.request('GET', `/v1/receiving?merchant_id=${m.id}`, { key: k });
      expect(now.body.receiving).toEqual(m.receiving);
    };
    for (const [code, receiving] of testCases) await run(key, tm, code, receiving);
    for (const [code, receiving] of liveCases) await run(live, lm, code, receiving);
    expectError(await app.request('PATCH', `/v1/merchants/${lm.id}`, { key: live, body: { rails: ['mock'] } }), 400, 'RECEIVING_MOCK_IN_LIVE');
    expect((await app.request('GET', `/v1/merchants/${lm.id}`, { key: live })).body.rails).toEqual(['x402']);
  });

  it('GIVEN a lower-case address and asset "usdc" WHEN writing receiving THEN the address comes back EIP-55 checksummed and the asset upper-cased', async () => {
    const key = await app.key('test');
    const receiving = { x402: { chain: 'base-sepolia', address: LOWER, asset: 'usdc' } };
    const expected = { x402: { chain: 'base-sepolia', address: CHECKSUMMED, asset: 'USDC' } };
    const m = await create(key, merchantBody({ receiving }));
    expect(m.receiving).toEqual(expected);

    const put = await app.request('PUT', '/v1/receiving', { key, body: { receiving: { mock: { account: 'a' }, ...receiving } } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({ receiving: { ...expected, mock: { account: 'a' } } });
    const got = await app.request('GET', '/v1/receiving', { key });
    expect(got.body).toEqual({ receiving: { ...expected, mock: { account: 'a' } }, rails: ['x402', 'mock'] });

    const patched = await app.request('PATCH', `/v1/merchants/${m.id}`, { key, body: { receiving: { x402: { chain: 'base-sepolia', address: LOWER.toUpperCase().replace('0X', '0x') } } } });
    expect(patched.status, patched.text).toBe(200);
    expect(patched.body.receiving).toEqual(expected);
  });

  it('GIVEN a mixed-case address with a wrong checksum WHEN writing receiving THEN 400 RECEIVING_ADDRESS_INVALID', async () => {
    const key = await app.key('test');
    const wrong = CHECKSUMMED.replace('fCD6', 'fcD6');
    expectError(
      await app.request('POST', '/v1/merchants', { key, body: merchantBody({ receiving: { x402: { chain: 'base-sepolia', address: wrong } } }) }),
      400,
      'RECEIVING_ADDRESS_INVALID',
    );
  });

  it('GIVEN PUT /v1/receiving WHEN it succeeds THEN the whole config is replaced and config_version bumps', async () => {
    const key = await app.key('test');
    const m = await create(key);
    const [before] = await sql(app, 'select config_version from merchants where id = ?', [m.id]);
    const put = await app.request('PUT', '/v1/receiving', { key, body: { receiving: { card: { processor: 'stripe', accountId: 'acct_1' } } } });
    expect(put.status, put.text).toBe(200);
    expect(put.body).toEqual({ receiving: { card: { processor: 'stripe', accountId: 'acct_1' } } });
    const got = await app.request('GET', `/v1/merchants/${m.id}`, { key });
    expect(got.body.receiving).toEqual({ card: { processor: 'stripe', accountId: 'acct_1' } });
    const [after] = await sql(app, 'select config_version from merchants where id = ?', [m.id]);
    expect(Number(after!.config_version)).toBeGreaterThan(Number(before!.config_version));
    expectError(await app.request('PUT', '/v1/receiving', { key, body: { receiving: { card: { processor: 'stripe', accountId: 'acct_1' } }, extra: 1 } }), 400, 'VALIDATION_FAILED');
    expectError(await app.request('PUT', '/v1/receiving', { key, body: {} }), 400, 'VALIDATION_FAILED');
  });

  it('GIVEN a project with no merchant WHEN GET or PUT /v1/receiving THEN 404 NOT_FOUND', async () => {
    const key = await app.key('test');
    expectError(await app.request('GET', '/v1/receiving', { key }), 404, 'NOT_FOUND');
    expectError(await app.request('PUT', '/v1/receiving', { key, body: { receiving: { mock: { account: 'a' } } } }), 404, 'NOT_FOUND');
  });
});

describe('GET /v1/merchants (list)', () => {
  it('GIVEN 5 merchants WHEN walking pages of 2 with the cursor THEN every merchant appears once, newest first', async () => {
    const key = await app.key('test');
    const created: string[] = [];
    for (let i = 0; i < 5; i++) created.push((await create(key)).id);
    const newestFirst = [...created].reverse();

    const seen: string[] = [];
    let cursor: string | null = null;
    const pages: boolean[] = [];
    do {
      const qs: string = cursor ? `?limit=2&cursor=${encodeURIComponent(cursor)}` : '?limit=2';
      const res = await app.request('GET', `/v1/merchants${qs}`, { key });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.length).toBeLessThanOrEqual(2);
      seen.push(...res.body.data.map((m: { id: string }) => m.id));
      pages.push(res.body.has_more);
      expect(res.body.next_cursor === null).toBe(!res.body.has_more);
      cursor = res.body.next_cursor;
    } while (cursor);
    expect(seen).toEqual(newestFirst);
    expect(pages).toEqual([true, true, false]);

    const all = await app.request('GET', '/v1/merchants', { key });
    expect(all.body.data.map((m: { id: string }) => m.id)).toEqual(newestFirst);
    expect(all.body).toMatchObject({ has_more: false, next_cursor: null });
    const exact = await app.request('GET', '/v1/merchants?limit=5', { key });
    expect(exact.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(exact.body.data).toHaveLength(5);
  });

  it('GIVEN 21 merchants WHEN listing without limit THEN the default page is 20 with has_more', async () => {
    const key = await app.key('test');
    for (let i = 0; i < 21; i++) await create(key);
    const res = await app.request('GET', '/v1/merchants', { key });
    expect(res.body.data).toHaveLength(20);
    expect(res.body.has_more).toBe(true);
    const rest = await app.request('GET', `/v1/merchants?cursor=${res.body.next_cursor}`, { key });
    expect(rest.body.data).toHaveLength(1);
    expect(rest.body.has_more).toBe(false);
    expect((await app.request('GET', '/v1/merchants?limit=100', { key })).body.data).toHaveLength(21);
    expect((await app.request('GET', '/v1/merchants?limit=1', { key })).body.data).toHaveLength(1);
  });

  it('GIVEN an out-of-range limit or a foreign cursor WHEN listing THEN 400 VALIDATION_FAILED', async () => {
    for (const q of ['limit=0', 'limit=101', 'limit=abc', 'limit=2.5', 'limit=-1', 'cursor=', 'cursor=nonsense', 'bogus=1']) {
      const res = await app.request('GET', `/v1/merchants?${q}`, { key: testKey });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain('query');
    }
  });

  it('GIVEN merchants in both modes and other projects WHEN listing THEN only the key\'s project and mode appear', async () => {
    const key = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    const mine = await create(key);
    const mineLive = await create(live);
    await create(await app.key('test'));
    expect((await app.request('GET', '/v1/merchants', { key })).body.data.map((m: { id: string }) => m.id)).toEqual([mine.id]);
    expect((await app.request('GET', '/v1/merchants', { key: live })).body.data.map((m: { id: string }) => m.id)).toEqual([mineLive.id]);
  });
});

describe('GET and PATCH /v1/merchants/:id', () => {
  it('GIVEN a merchant WHEN GET by id THEN it equals the created object; unknown or malformed ids are 404', async () => {
    const m = await create(testKey);
    const res = await app.request('GET', `/v1/merchants/${m.id}`, { key: testKey });
    expect(res.status).toBe(200);
    expect(res.body).toEqual(m);
    expectError(await app.request('GET', '/v1/merchants/mrch_00000000000000000000000000', { key: testKey }), 404, 'NOT_FOUND');
    expectError(await app.request('GET', '/v1/merchants/not-an-id', { key: testKey }), 404, 'NOT_FOUND');
    expectError(await app.request('PATCH', '/v1/merchants/mrch_00000000000000000000000000', { key: testKey, body: { name: 'x' } }), 404, 'NOT_FOUND');
  });

  it('GIVEN a merchant WHEN PATCHing one field at a time THEN only that field changes', async () => {
    const key = await app.key('test');
    const m = await create(key, merchantBody({ trusted_svc_jwks_url: 'https://issuer.example.com/jwks' }));
    const patch = async (body: Record<string, unknown>) => {
      const res = await app.request('PATCH', `/v1/merchants/${m.id}`, { key, body });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    const immutable = (x: Record<string, unknown>) => ({
      id: x.id, slug: x.slug, livemode: x.livemode, receipt_kid: x.receipt_kid, receipt_pub_jwk: x.receipt_pub_jwk, created_at: x.created_at, is_default: x.is_default,
    });

    const a = await patch({ name: 'Renamed' });
    expect(a).toEqual({ ...m, name: 'Renamed', updated_at: a.updated_at });
    expect(Date.parse(a.updated_at)).toBeGreaterThanOrEqual(Date.parse(m.updated_at));

    const b = await patch({ domain: 'new.example.org' });
    const proof = a.domain_verification.dns_txt.value;
    expect(b).toEqual({
      ...a,
      domain: 'new.example.org',
      domain_verification: {
        ...a.domain_verification,
        dns_txt: { name: '_svc-checkout.new.example.org', value: proof },
        https_file: { url: 'https://new.example.org/.well-known/svc-checkout-verification.txt', content: proof },
      },
      updated_at: b.updated_at,
    });

    const c = await patch({ rails: ['x402'] });
    expect(c).toEqual({ ...b, rails: ['x402'], updated_at: c.updated_at });

    const d = await patch({ trusted_svc_jwks_url: null });
    expect(d).toEqual({ ...c, trusted_svc_jwks_url: null, updated_at: d.updated_at });

    const e = await patch({ receiving: { mock: { account: 'acct_2' } } });
    expect(e).toEqual({ ...d, receiving: { mock: { account: 'acct_2' } }, updated_at: e.updated_at });

    const f = await patch({});
    expect(f).toEqual({ ...e, updated_at: f.updated_at });
    expect(immutable(f)).toEqual(immutable(m));
  });

  it('GIVEN a PATCH naming an immutable field WHEN sent THEN 400 VALIDATION_FAILED and nothing changes', async () => {
    const m = await create(testKey);
    const cases: Array<Record<string, unknown>> = [
      { slug: 'another-slug' },
      { livemode: true },
      { receipt_kid: 'x' },
      { receipt_pub_jwk: { kty: 'OKP', crv: 'Ed25519', x: 'AAAA', kid: 'k' } },
      { id: 'mrch_00000000000000000000000000' },
      { is_default: false },
      { name: 'Ok', slug: 'combined-with-valid' },
    ];
    for (const body of cases) {
      const res = await app.request('PATCH', `/v1/merchants/${m.id}`, { key: testKey, body });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain(Object.keys(body).at(-1)!);
    }
    expect((await app.request('GET', `/v1/merchants/${m.id}`, { key: testKey })).body).toEqual(m);
  });
});

describe('config_version under concurrent writes', () => {
  const BUMP = 'update merchants set config_version = config_version + 1 where id = ?';

  it('GIVEN a catalog-style bump committed while a PATCH is in flight WHEN the PATCH lands THEN both writes count', async () => {
    const key = await app.key('test');
    const m = await create(key);
    const v0 = await configVersion(app, m.id);
    const res = await racePastRowLock(app, BUMP, m.id, () => app.request('PATCH', `/v1/merchants/${m.id}`, { key, body: { name: 'Raced' } }));
    expect(res.status, res.text).toBe(200);
    expect(res.body.name).toBe('Raced');
    expect(await configVersion(app, m.id)).toBe(v0 + 2);
  });

  it('GIVEN a catalog-style bump committed while PUT /v1/receiving is in flight WHEN the PUT lands THEN both writes count', async () => {
    const key = await app.key('test');
    const m = await create(key);
    const v0 = await configVersion(app, m.id);
    const res = await racePastRowLock(app, BUMP, m.id, () => app.request('PUT', '/v1/receiving', { key, body: { receiving: { mock: { account: 'raced' } } } }));
    expect(res.status, res.text).toBe(200);
    expect(await configVersion(app, m.id)).toBe(v0 + 2);
    expect((await app.request('GET', '/v1/receiving', { key })).body.receiving).toEqual({ mock: { account: 'raced' } });
  });

  it('GIVEN concurrent PATCHes and catalog writes WHEN all finish THEN config_version rose once per write', async () => {
    const key = await app.key('test');
    const m = await create(key);
    const v0 = await configVersion(app, m.id);
    const calls = [];
    for (let i = 0; i < 6; i++) {
      calls.push(app.request('PATCH', `/v1/merchants/${m.id}`, { key, body: { name: `N${i}` } }));
      calls.push(app.request('POST', '/v1/catalog', { key, body: { sku: `C-${i}`, name: 'c', price: { amount: '1', currency: 'USD' } } }));
    }
    for (const r of await Promise.all(calls)) expect(r.status, r.text).toBeLessThan(300);
    expect(await configVersion(app, m.id)).toBe(v0 + 12);
  });
});

describe('JWKS', () => {
  it('GIVEN a merchant WHEN GET /v1/merchants/:id/jwks without a key THEN its public key with CORS * and a 300 s cache', async () => {
    const m = await create(testKey);
    const res = await app.request('GET', `/v1/merchants/${m.id}/jwks`);
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('cache-control')).toBe('public, max-age=300');
    expect(res.body.keys).toHaveLength(1);
    const [jwk] = res.body.keys;
    expect(jwk).toMatchObject(m.receipt_pub_jwk);
    expect(jwk.kid).toBe(`${m.id}-receipts-v1`);
    expect(jwk.d).toBeUndefined();
  });

  it('GIVEN a live merchant WHEN its JWKS is fetched THEN it resolves by id alone; unknown ids are 404', async () => {
    const lm = await create(liveKey);
    const res = await app.request('GET', `/v1/merchants/${lm.id}/jwks`, { key: testKey });
    expect(res.status).toBe(200);
    expect(res.body.keys[0].x).toBe(lm.receipt_pub_jwk.x);
    expectError(await app.request('GET', '/v1/merchants/mrch_00000000000000000000000000/jwks'), 404, 'NOT_FOUND');
    expectError(await app.request('GET', '/v1/merchants/garbage/jwks'), 404, 'NOT_FOUND');
  });

  it('GIVEN the server-held seed WHEN it signs THEN the published JWKS key verifies the signature', async () => {
    const m = await create(testKey);
    const [row] = await sql(app, 'select receipt_seed_sealed from merchants where id = ?', [m.id]);
    const d = app.services.box.open(row!.receipt_seed_sealed, m.id);
    const jwks = (await app.request('GET', `/v1/merchants/${m.id}/jwks`)).body;
    const privateKey = createPrivateKey({ key: { kty: 'OKP', crv: 'Ed25519', d, x: jwks.keys[0].x }, format: 'jwk' });
    const msg = Buffer.from(`receipt for ${m.id}`);
    const sig = sign(null, msg, privateKey);
    const publicKey = createPublicKey({ key: jwks.keys[0], format: 'jwk' });
    expect(verify(null, msg, publicKey, sig)).toBe(true);
    expect(verify(null, Buffer.from('tampered'), publicKey, sig)).toBe(false);
    // The public half derived from the seed alone is the published x.
    expect(createPublicKey(privateKey).export({ format: 'jwk' }).x).toBe(jwks.keys[0].x);
  });
});

describe('isolation', () => {
  it('GIVEN merchants in the other mode or another project WHEN addressed by id THEN 404 NOT_FOUND on every route', async () => {
    const key = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    const foreign = await app.key('test');
    const tm = await create(key);
    const lm = await create(live);
    const fm = await create(foreign);

    const attempts: Array<[TestKey, string]> = [
      [key, lm.id], // test key -> live merchant
      [live, tm.id], // live key -> test merchant
      [key, fm.id], // another project's merchant
      [foreign, tm.id],
    ];
    for (const [k, id] of attempts) {
      expectError(await app.request('GET', `/v1/merchants/${id}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('PATCH', `/v1/merchants/${id}`, { key: k, body: { name: 'Hijacked' } }), 404, 'NOT_FOUND');
      const q = `merchant_id=${id}`;
      expectError(await app.request('GET', `/v1/catalog?${q}`, { key: k }), 404, 'NOT_FOUND');
      expectError(
        await app.request('POST', `/v1/catalog?${q}`, { key: k, body: { sku: 'X', name: 'X', price: { amount: '1', currency: 'USD' } } }),
        404,
        'NOT_FOUND',
      );
      expectError(await app.request('PATCH', `/v1/catalog/X?${q}`, { key: k, body: { available: false } }), 404, 'NOT_FOUND');
      expectError(await app.request('DELETE', `/v1/catalog/X?${q}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/v1/receiving?${q}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('PUT', `/v1/receiving?${q}`, { key: k, body: { receiving: { mock: { account: 'evil' } } } }), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/v1/policy?${q}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('PUT', `/v1/policy?${q}`, { key: k, body: { body: {} } }), 404, 'NOT_FOUND');
      expectError(await app.request('POST', `/v1/validate?${q}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('POST', `/v1/publish?${q}`, { key: k }), 404, 'NOT_FOUND');
    }
    // THEN nothing was changed through the foreign ids.
    for (const [k, m] of [[key, tm], [live, lm], [foreign, fm]] as const) {
      expect((await app.request('GET', `/v1/merchants/${m.id}`, { key: k })).body).toEqual(m);
    }
    const rows = await sql(app, 'select count(*)::int as n from catalog_items where merchant_id in (?, ?, ?)', [tm.id, lm.id, fm.id]);
    expect(Number(rows[0]!.n)).toBe(0);
    const pols = await sql(app, 'select count(*)::int as n from policy_versions where merchant_id in (?, ?, ?)', [tm.id, lm.id, fm.id]);
    expect(Number(pols[0]!.n)).toBe(0);
  });

  it('GIVEN a malformed merchant_id query WHEN calling a merchant route THEN 404 NOT_FOUND, like an unknown id', async () => {
    expectError(await app.request('GET', '/v1/catalog?merchant_id=shop', { key: testKey }), 404, 'NOT_FOUND');
  });
});

describe('receipt seed', () => {
  it('GIVEN a merchant WHEN reading it through every route THEN the seed never appears, and it is stored sealed', async () => {
    const key = await app.key('test');
    const created = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
    const m = created.body;
    const [row] = await sql(app, 'select * from merchants where id = ?', [m.id]);
    const sealed: string = row!.receipt_seed_sealed;
    expect(sealed.startsWith('v1.')).toBe(true);
    expect(sealed).not.toContain(m.receipt_pub_jwk.x);
    const d = app.services.box.open(sealed, m.id);
    expect(d).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(sealed).not.toContain(d);
    // The seal is bound to its merchant: it does not open under another id.
    expect(() => app.services.box.open(sealed, 'mrch_00000000000000000000000000')).toThrow();

    const texts = [
      created.text,
      (await app.request('GET', `/v1/merchants/${m.id}`, { key })).text,
      (await app.request('GET', '/v1/merchants', { key })).text,
      (await app.request('PATCH', `/v1/merchants/${m.id}`, { key, body: { name: 'N' } })).text,
      (await app.request('GET', `/v1/merchants/${m.id}/jwks`)).text,
      (await app.request('GET', '/v1/receiving', { key })).text,
    ];
    for (const t of texts) {
      expect(t).not.toContain(d);
      expect(t).not.toContain(sealed);
      expect(t).not.toMatch(/seed/i);
    }
  });
});
