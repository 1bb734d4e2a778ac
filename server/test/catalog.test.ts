import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configVersion, expectError } from './helpers/foundation.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

type Shop = { key: TestKey; merchantId: string; q: string };

/** A fresh project with its default merchant; `q` addresses it explicitly. */
async function shop(): Promise<Shop> {
  const key = await app.key('test');
  const res = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
  expect(res.status, res.text).toBe(201);
  return { key, merchantId: res.body.id, q: `?merchant_id=${res.body.id}` };
}

const item = (o: Record<string, unknown> = {}) => ({ sku: 'SKU-1', name: 'Thing', price: { amount: '1.50', currency: 'USD' }, ...o });

async function addItem(s: Shop, body: Record<string, unknown>) {
  const res = await app.request('POST', '/v1/catalog', { key: s.key, body });
  expect(res.status, res.text).toBe(201);
  return res.body;
}

describe('POST /v1/catalog', () => {
  it('GIVEN a full item WHEN created THEN 201 with a prod_ id and every field echoed', async () => {
    const s = await shop();
    const body = item({ description: 'A thing', category: 'tools', unit: 'each', metadata: { color: 'red', tags: ['a', 'b'], n: 1 } });
    const res = await app.request('POST', `/v1/catalog${s.q}`, { key: s.key, body });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toEqual({
      id: expect.stringMatching(/^prod_[0-9a-z]{26}$/),
      sku: 'SKU-1',
      name: 'Thing',
      price: { amount: '1.50', currency: 'USD' },
      available: true,
      description: 'A thing',
      category: 'tools',
      unit: 'each',
      metadata: { color: 'red', tags: ['a', 'b'], n: 1 },
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const listed = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(listed.body).toEqual({ items: [res.body] });
  });

  it('GIVEN exact decimal amounts WHEN created THEN they come back byte for byte, currency upper-cased', async () => {
    const s = await shop();
    const amounts = ['1.50', '0.00000001', '000123.10', '999999999999.99999999', '0', '10', '7.0'];
    for (const [i, amount] of amounts.entries()) {
      const created = await addItem(s, item({ sku: `AMT-${i}`, price: { amount, currency: i % 2 ? 'usd' : 'Usd' } }));
      expect(created.price).toEqual({ amount, currency: 'USD' });
    }
    const listed = await app.request('GET', '/v1/catalog', { key: s.key });
    const bySku = Object.fromEntries(listed.body.items.map((i: { sku: string; price: { amount: string } }) => [i.sku, i.price.amount]));
    expect(amounts.map((_, i) => bySku[`AMT-${i}`])).toEqual(amounts);
    // The raw JSON carries the strings untouched (no numeric re-formatting on the way out).
    for (const amount of amounts) expect(listed.text).toContain(`"amount":"${amount}"`);
  });

  it('GIVEN an invalid price.amount WHEN created THEN 400 PRICE_AMOUNT_INVALID', async () => {
    const s = await shop();
    const bad: unknown[] = ['1.123456789', '1e5', '-1', 12.5, '', '1234567890123', ' 1.00', '1,00', '1.', '.5', '+1', '0x10', null];
    for (const amount of bad) {
      const res = await app.request('POST', '/v1/catalog', { key: s.key, body: item({ price: { amount, currency: 'USD' } }) });
      expectError(res, 400, 'PRICE_AMOUNT_INVALID');
      expect(res.body.error_human, String(amount)).toContain('price.amount');
    }
    expect((await app.request('GET', '/v1/catalog', { key: s.key })).body.items).toEqual([]);
  });

  it('GIVEN a bad sku, name or currency WHEN created THEN 400 VALIDATION_FAILED naming the field', async () => {
    const s = await shop();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ sku: 'has space' }, 'sku'],
      [{ sku: '' }, 'sku'],
      [{ sku: 'a/b' }, 'sku'],
      [{ sku: 'ü' }, 'sku'],
      [{ sku: 'x'.repeat(129) }, 'sku'],
      [{ sku: 42 }, 'sku'],
      [{ name: undefined }, 'name'],
      [{ name: '' }, 'name'],
      [{ name: '   ' }, 'name'],
      [{ price: { amount: '1.00', currency: 'US' } }, 'currency'],
      [{ price: { amount: '1.00', currency: 'USDC' } }, 'currency'],
      [{ price: { amount: '1.00', currency: 'U$D' } }, 'currency'],
      [{ price: { amount: '1.00' } }, 'currency'],
      [{ price: undefined }, 'price'],
      [{ price: '1.00' }, 'price'],
      [{ available: 'yes' }, 'available'],
      [{ metadata: ['not', 'an', 'object'] }, 'metadata'],
      [{ id: 'prod_x' }, 'id'],
    ];
    for (const [override, field] of cases) {
      const body: Record<string, unknown> = item(override);
      for (const k of Object.keys(body)) if (body[k] === undefined) delete body[k];
      const res = await app.request('POST', '/v1/catalog', { key: s.key, body });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, JSON.stringify(override)).toContain(field);
    }
    // The longest allowed sku is fine.
    const long = 'A'.repeat(128);
    expect((await addItem(s, item({ sku: long }))).sku).toBe(long);
  });

  it('GIVEN an existing sku WHEN created again THEN 409 PRODUCT_SKU_TAKEN; another merchant may use it', async () => {
    const s = await shop();
    await addItem(s, item());
    expectError(await app.request('POST', '/v1/catalog', { key: s.key, body: item({ name: 'Other' }) }), 409, 'PRODUCT_SKU_TAKEN');
    // SKUs are case-sensitive.
    expect((await addItem(s, item({ sku: 'sku-1' }))).sku).toBe('sku-1');
    const second = await app.request('POST', '/v1/merchants', { key: s.key, body: merchantBody() });
    const res = await app.request('POST', `/v1/catalog?merchant_id=${second.body.id}`, { key: s.key, body: item() });
    expect(res.status, res.text).toBe(201);
    const first = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(first.body.items.map((i: { sku: string; name: string }) => `${i.sku}:${i.name}`).sort()).toEqual(['SKU-1:Thing', 'sku-1:Thing']);
  });

  it('GIVEN one sku WHEN five creates race for it THEN exactly one wins and the rest are 409 PRODUCT_SKU_TAKEN', async () => {
    const s = await shop();
    const results = await Promise.all(Array.from({ length: 5 }, (_, i) => app.request('POST', '/v1/catalog', { key: s.key, body: item({ name: `n${i}` }) })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 409, 'PRODUCT_SKU_TAKEN');
    expect((await app.request('GET', '/v1/catalog', { key: s.key })).body.items).toHaveLength(1);
  });

  it('GIVEN a project with no merchant WHEN using the catalog THEN 404 NOT_FOUND', async () => {
    const key = await app.key('test');
    expectError(await app.request('GET', '/v1/catalog', { key }), 404, 'NOT_FOUND');
    expectError(await app.request('POST', '/v1/catalog', { key, body: item() }), 404, 'NOT_FOUND');
  });
});

describe('GET /v1/catalog', () => {
  it('GIVEN items in several categories WHEN listed THEN ordered by category then name, uncategorized last', async () => {
    const s = await shop();
    const specs: Array<[string, string, string | undefined]> = [
      ['s1', 'zebra', 'beta'],
      ['s2', 'apple', undefined],
      ['s3', 'mango', 'alpha'],
      ['s4', 'banana', 'beta'],
      ['s5', 'cherry', 'alpha'],
      ['s6', 'aardvark', undefined],
    ];
    for (const [sku, name, category] of specs) await addItem(s, item({ sku, name, ...(category ? { category } : {}) }));
    const res = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(res.status).toBe(200);
    expect(res.body.items.map((i: { category?: string; name: string }) => `${i.category ?? '-'}/${i.name}`)).toEqual([
      'alpha/cherry',
      'alpha/mango',
      'beta/banana',
      'beta/zebra',
      '-/aardvark',
      '-/apple',
    ]);
    // Absent optional fields are left out, not null.
    const uncategorized = res.body.items.at(-1);
    expect('category' in uncategorized).toBe(false);
    expect('description' in uncategorized).toBe(false);
  });

  it('GIVEN available and unavailable items WHEN listed with available=true THEN only available ones', async () => {
    const s = await shop();
    await addItem(s, item({ sku: 'on-1', name: 'a' }));
    await addItem(s, item({ sku: 'off-1', name: 'b', available: false }));
    await addItem(s, item({ sku: 'on-2', name: 'c' }));
    const all = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(all.body.items.map((i: { sku: string }) => i.sku)).toEqual(['on-1', 'off-1', 'on-2']);
    const avail = await app.request('GET', '/v1/catalog?available=true', { key: s.key });
    expect(avail.body.items.map((i: { sku: string }) => i.sku)).toEqual(['on-1', 'on-2']);
    expectError(await app.request('GET', '/v1/catalog?available=yes', { key: s.key }), 400, 'VALIDATION_FAILED');
  });
});

describe('PATCH and DELETE /v1/catalog/:sku', () => {
  it('GIVEN an item WHEN PATCHing price, available or metadata THEN only those change', async () => {
    const s = await shop();
    const orig = await addItem(s, item({ description: 'd', category: 'c', unit: 'GB', metadata: { a: 1 } }));
    const patch = async (body: Record<string, unknown>) => {
      const res = await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body });
      expect(res.status, res.text).toBe(200);
      return res.body;
    };
    const a = await patch({ price: { amount: '000002.50', currency: 'eur' } });
    expect(a).toEqual({ ...orig, price: { amount: '000002.50', currency: 'EUR' }, updated_at: a.updated_at });
    const b = await patch({ available: false });
    expect(b).toEqual({ ...a, available: false, updated_at: b.updated_at });
    const c = await patch({ metadata: { b: [true] } });
    expect(c).toEqual({ ...b, metadata: { b: [true] }, updated_at: c.updated_at });
    const d = await patch({});
    expect(d).toEqual({ ...c, updated_at: d.updated_at });
    expect(d.id).toBe(orig.id);
    expect(d.created_at).toBe(orig.created_at);
    expect(Date.parse(d.updated_at)).toBeGreaterThanOrEqual(Date.parse(orig.updated_at));
    const listed = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(listed.body.items).toEqual([d]);
  });

  it('GIVEN a bad patch WHEN sent THEN 400 with the right code and the item is unchanged', async () => {
    const s = await shop();
    const orig = await addItem(s, item());
    expectError(await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { price: { amount: '1.123456789', currency: 'USD' } } }), 400, 'PRICE_AMOUNT_INVALID');
    expectError(await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { price: { amount: 3, currency: 'USD' } } }), 400, 'PRICE_AMOUNT_INVALID');
    expectError(await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { sku: 'renamed' } }), 400, 'VALIDATION_FAILED');
    expectError(await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { available: 'no' } }), 400, 'VALIDATION_FAILED');
    expect((await app.request('GET', '/v1/catalog', { key: s.key })).body.items).toEqual([orig]);
  });

  it('GIVEN an unknown sku WHEN PATCH or DELETE THEN 404 NOT_FOUND', async () => {
    const s = await shop();
    await addItem(s, item());
    expectError(await app.request('PATCH', '/v1/catalog/NOPE', { key: s.key, body: { available: true } }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', '/v1/catalog/NOPE', { key: s.key }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', '/v1/catalog/sku-1', { key: s.key }), 404, 'NOT_FOUND'); // case-sensitive
    // Paths that cannot be a SKU at all (here with a NUL byte or a slash) are just as unknown.
    expectError(await app.request('PATCH', '/v1/catalog/a%00b', { key: s.key, body: { available: true } }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', '/v1/catalog/a%2Fb', { key: s.key }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', '/v1/catalog/a%0Ab', { key: s.key }), 404, 'NOT_FOUND');
  });

  it('GIVEN an item WHEN DELETEd THEN 204 with no body and it stays listed with available=false', async () => {
    const s = await shop();
    const orig = await addItem(s, item());
    const res = await app.request('DELETE', '/v1/catalog/SKU-1', { key: s.key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    const listed = await app.request('GET', '/v1/catalog', { key: s.key });
    expect(listed.body.items).toHaveLength(1);
    expect(listed.body.items[0]).toEqual({ ...orig, available: false, updated_at: listed.body.items[0].updated_at });
    expect((await app.request('GET', '/v1/catalog?available=true', { key: s.key })).body.items).toEqual([]);
    // Deleting again is still a 204 (the row remains), and the sku stays taken.
    expect((await app.request('DELETE', '/v1/catalog/SKU-1', { key: s.key })).status).toBe(204);
    expectError(await app.request('POST', '/v1/catalog', { key: s.key, body: item() }), 409, 'PRODUCT_SKU_TAKEN');
    // It can be made available again.
    const back = await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { available: true } });
    expect(back.body.available).toBe(true);
  });
});

describe('manifest cache invalidation', () => {
  it('GIVEN a merchant WHEN any catalog write succeeds THEN merchants.config_version increases; failed writes leave it', async () => {
    const s = await shop();
    let v = await configVersion(app, s.merchantId);
    const expectBump = async () => {
      const now = await configVersion(app, s.merchantId);
      expect(now).toBeGreaterThan(v);
      v = now;
    };
    const expectSame = async () => expect(await configVersion(app, s.merchantId)).toBe(v);

    await addItem(s, item());
    await expectBump();
    expect((await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { price: { amount: '2', currency: 'USD' } } })).status).toBe(200);
    await expectBump();
    expect((await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { available: false } })).status).toBe(200);
    await expectBump();
    expect((await app.request('PATCH', '/v1/catalog/SKU-1', { key: s.key, body: { metadata: { x: 1 } } })).status).toBe(200);
    await expectBump();
    expect((await app.request('DELETE', '/v1/catalog/SKU-1', { key: s.key })).status).toBe(204);
    await expectBump();

    expect((await app.request('POST', '/v1/catalog', { key: s.key, body: item() })).status).toBe(409);
    expect((await app.request('POST', '/v1/catalog', { key: s.key, body: item({ sku: 'X', price: { amount: '1e5', currency: 'USD' } }) })).status).toBe(400);
    expect((await app.request('PATCH', '/v1/catalog/NOPE', { key: s.key, body: { available: true } })).status).toBe(404);
    expect((await app.request('GET', '/v1/catalog', { key: s.key })).status).toBe(200);
    await expectSame();
  });
});
