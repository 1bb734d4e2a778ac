import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ORDER_EXPORT_COLUMNS } from '@svc/contract';
import { publishedMerchant } from './helpers/agent.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { ingestOrder } from './helpers/orders.js';

/**
 * Issue 29: the order feed's search (`q`: an order id, a session id or an agent id) and its CSV
 * export (GET /v1/orders/export.csv), over orders reported through ingest at chosen times. A
 * stranger's key (another project) and the project's key of the other mode find nothing.
 */
let app: TestApp;
let key: TestKey;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
const AGENT = randomUUID();
const OTHER_AGENT = randomUUID();
/** An agent id a spreadsheet would run as a formula if the export wrote it as it is. */
const FORMULA_AGENT = '=HYPERLINK("http://evil.example","x")';
const order: Record<string, string> = {};

const feed = async (query: string, k: TestKey = key) => {
  const res = await app.request('GET', `/v1/orders?limit=100&${query}`, { key: k });
  expect(res.status, res.text).toBe(200);
  return (res.body.data as Array<{ id: string; session_id: string }>).map((o) => o.id);
};
const exportCsv = async (query: string, k: TestKey = key) => {
  const res = await app.request('GET', `/v1/orders/export.csv?${query}`, { key: k });
  expect(res.status, res.text).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
  expect(res.headers.get('content-disposition')).toMatch(/attachment; filename="orders-(test|live)\.csv"/);
  return res.text.trimEnd().split('\n');
};

beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
  key = shop.key;
  const m = shop.merchant.id;
  order.old = await ingestOrder(app, key, { merchantId: m, decision: 'accept', tier: 'standard', agent: AGENT, label: 'aa01', at: '2026-05-01T10:00:00.000Z', total: '1234567.89' });
  order.mid = await ingestOrder(app, key, { merchantId: m, decision: 'reject', tier: 'cautious', agent: OTHER_AGENT, label: 'aa02', at: '2026-05-02T10:00:00.000Z' });
  order.formula = await ingestOrder(app, key, { merchantId: m, decision: 'accept', tier: 'standard', agent: FORMULA_AGENT, label: 'aa03', at: '2026-05-03T10:00:00.000Z', total: '0.10' });
  order.new = await ingestOrder(app, key, { merchantId: m, decision: 'hold', tier: 'cautious', agent: AGENT, label: 'aa04', at: '2026-05-04T10:00:00.000Z' });
});
afterAll(async () => app?.stop());

describe('GET /v1/orders?q= (search)', () => {
  it('GIVEN orders of two agents WHEN searched by an order id, its session id or an agent id (any case) THEN exactly those orders', async () => {
    expect(await feed(`q=${order.mid}`)).toEqual([order.mid]);
    const session = (await app.request('GET', `/v1/orders?limit=100`, { key })).body.data.find((o: { id: string }) => o.id === order.old).session_id as string;
    expect(await feed(`q=${session}`)).toEqual([order.old]);
    expect(await feed(`q=${AGENT}`)).toEqual([order.new, order.old]);
    expect(await feed(`q=${AGENT.toUpperCase()}`)).toEqual([order.new, order.old]);
    expect(await feed(`q=${encodeURIComponent(` ${OTHER_AGENT} `)}`)).toEqual([order.mid]);
    expect(await feed(`q=${randomUUID()}`)).toEqual([]);
    // combined with the other filters
    expect(await feed(`q=${AGENT}&decision=hold`)).toEqual([order.new]);
  });

  it('GIVEN a stranger\'s key and the project\'s live key WHEN they search for the order THEN nothing', async () => {
    const stranger = await app.key('test');
    expect(await feed(`q=${order.mid}`, stranger)).toEqual([]);
    expect(await feed(`q=${AGENT}`, stranger)).toEqual([]);
    const live = await app.key('live', { projectId: key.projectId });
    expect(await feed(`q=${order.mid}`, live)).toEqual([]);
  });

  it('GIVEN an empty or oversized search WHEN the feed is read THEN 400 VALIDATION_FAILED naming q', async () => {
    for (const q of ['', '%20', 'x'.repeat(201)]) {
      const res = await app.request('GET', `/v1/orders?q=${q}`, { key });
      expect(res.status, q).toBe(400);
      expect(res.body.reason_codes).toEqual(['VALIDATION_FAILED']);
      expect(res.body.error_human).toContain('q');
    }
  });
});

describe('GET /v1/orders/export.csv', () => {
  it('GIVEN four orders WHEN exported THEN a header and every order, newest first, with exact decimals', async () => {
    const lines = await exportCsv(`merchant_id=${shop.merchant.id}`);
    expect(lines[0]).toBe(ORDER_EXPORT_COLUMNS.join(','));
    expect(lines).toHaveLength(5);
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual([order.new, order.formula, order.mid, order.old]);
    const old = lines.at(-1)!.split(',');
    const col = (name: (typeof ORDER_EXPORT_COLUMNS)[number]) => old[ORDER_EXPORT_COLUMNS.indexOf(name)];
    expect(col('created_at')).toBe('2026-05-01T10:00:00.000Z');
    expect(col('agent_id')).toBe(AGENT);
    expect(col('total')).toBe('1234567.89');
    expect(col('currency')).toBe('USD');
    expect(col('amount_refunded')).toBe('0.00');
    expect(col('decision')).toBe('accept');
  });

  it('GIVEN an agent id that starts with = WHEN exported THEN its cell starts with an apostrophe (never a formula) and is quoted as RFC 4180 says', async () => {
    const lines = await exportCsv(`q=${encodeURIComponent(FORMULA_AGENT)}`);
    expect(lines).toHaveLength(2);
    expect(lines[1]).toContain(`"'=HYPERLINK(""http://evil.example"",""x"")"`);
    expect(lines[1]).not.toMatch(/,=/);
  });

  it('GIVEN a date range WHEN exported THEN only orders created in it (from inclusive, to exclusive)', async () => {
    const lines = await exportCsv(`created_gte=2026-05-02T00:00:00Z&created_lt=2026-05-04T00:00:00Z`);
    expect(lines.slice(1).map((l) => l.split(',')[0])).toEqual([order.formula, order.mid]);
    expect(await exportCsv('created_gte=2027-01-01T00:00:00Z')).toEqual([ORDER_EXPORT_COLUMNS.join(',')]);
  });

  it('GIVEN a stranger\'s key or the live key WHEN it exports THEN only the header; another project\'s merchant is 404', async () => {
    const stranger = await app.key('test');
    expect(await exportCsv('', stranger)).toEqual([ORDER_EXPORT_COLUMNS.join(',')]);
    expect(await exportCsv('', await app.key('live', { projectId: key.projectId }))).toEqual([ORDER_EXPORT_COLUMNS.join(',')]);
    const res = await app.request('GET', `/v1/orders/export.csv?merchant_id=${shop.merchant.id}`, { key: stranger });
    expect(res.status).toBe(404);
    expect(res.body.reason_codes).toEqual(['NOT_FOUND']);
  });

  it('GIVEN orders read one per query WHEN exported THEN every one, once, in order: the keyset reads join up into the same document', async () => {
    const { exportOrdersCsv } = await import('../src/modules/orders/service.js');
    const auth = { via: 'key' as const, keyId: key.id, userId: null, sessionId: null, projectId: key.projectId, mode: 'test' as const, livemode: false, scopes: [] };
    for (const batch of [1, 3]) {
      const stream = await exportOrdersCsv(app.services.orm.em.fork(), auth, { merchant_id: shop.merchant.id }, batch);
      let text = '';
      for await (const chunk of stream) text += String(chunk);
      expect(text.trimEnd().split('\n'), `batch ${batch}`).toEqual(await exportCsv(`merchant_id=${shop.merchant.id}`));
    }
  });
});
