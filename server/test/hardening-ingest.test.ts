import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { eventTypes, openSession, ordersOf, settle } from './helpers/agent-protocol.js';
import { publishedMerchant } from './helpers/agent.js';
import { expectError, sql } from './helpers/foundation.js';

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';

const ingestSession = (id: string, merchantId: string, over: Record<string, unknown> = {}) => ({
  id,
  merchantId,
  agentId: randomUUID(),
  state: 'accepted',
  verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] },
  total: { currency: 'USD', subtotal: '4.50', tax: '0.00', total: '4.50' },
  lines: [{ sku: 'coffee', qty: 1 }],
  ...over,
});

/** The three ingest calls for one session id, each expected to be refused with the same 409. */
async function expectAllRefused(key: TestKey, id: string, merchantId: string) {
  const order = await app.request('POST', '/v1/ingest/order', {
    key,
    body: { session: ingestSession(id, merchantId), receipt: RECEIPT, settlement: { reference: 'attacker-ref', rail: 'x402' } },
  });
  expectError(order, 409, 'SESSION_NOT_INGESTIBLE');
  const decision = await app.request('POST', '/v1/ingest/decision', {
    key,
    body: { session: ingestSession(id, merchantId, { state: 'held', verdict: { decision: 'reject' } }) },
  });
  expectError(decision, 409, 'SESSION_NOT_INGESTIBLE');
  const session = await app.request('POST', '/v1/ingest/session', { key, body: { session: ingestSession(id, merchantId) } });
  expectError(session, 409, 'SESSION_NOT_INGESTIBLE');
  // One answer for every case: nothing about whose session it is.
  for (const r of [order, decision, session]) {
    expect(r.text).not.toMatch(/prj_|mrch_|sess_|cs_/);
    expect(r.body).toEqual(order.body);
  }
}

beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { products: [{ sku: 'coffee', amount: '4.50' }] });
});
afterAll(async () => app?.stop());

describe('hardening: ingest never writes hosted or foreign sessions (issue 9.1)', () => {
  it('GIVEN a hosted order already accepted WHEN ingest reports the same session THEN 409 SESSION_NOT_INGESTIBLE and nothing changes', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    const paid = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(paid.status, paid.text).toBe(200);
    const ordersBefore = await ordersOf(app, s.id);
    const eventsBefore = await eventTypes(app, s.id);
    const receiptsBefore = await sql(app, 'select id, jws from receipts where session_id = ? order by id', [s.id]);
    const key = await app.key('test', { projectId: shop.key.projectId, scopes: ['ingest:write'] });

    await expectAllRefused(key, s.id, shop.merchant.id);

    expect(await ordersOf(app, s.id)).toEqual(ordersBefore);
    expect(ordersBefore[0]!.settlement_ref).toBe(paid.body.fulfillment.reference);
    expect(await eventTypes(app, s.id)).toEqual(eventsBefore);
    expect(await sql(app, 'select id, jws from receipts where session_id = ? order by id', [s.id])).toEqual(receiptsBefore);
    expect(await sql(app, 'select 1 from ingest_log where session_id = ?', [s.id])).toEqual([]);
    expect(await sql(app, 'select 1 from ingested_sessions where session_id = ?', [s.id])).toEqual([]);
  });

  it('GIVEN a hosted session still awaiting payment WHEN ingest reports it THEN 409 and no order appears', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    await expectAllRefused(shop.key, s.id, shop.merchant.id);
    expect(await ordersOf(app, s.id)).toEqual([]);
    expect(await eventTypes(app, s.id)).toEqual([]);
    // The hosted checkout still settles it normally afterwards.
    const paid = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(paid.status, paid.text).toBe(200);
  });

  it("GIVEN another project's ingested order WHEN a second project reports the same session id THEN 409 (not 500) and the first order is intact", async () => {
    const a = await app.key('test');
    const b = await app.key('test');
    const ma = (await app.request('POST', '/v1/merchants', { key: a, body: merchantBody() })).body.id as string;
    const mb = (await app.request('POST', '/v1/merchants', { key: b, body: merchantBody() })).body.id as string;
    const id = `sess_${randomUUID().replace(/-/g, '')}`;
    const first = await app.request('POST', '/v1/ingest/order', {
      key: a,
      body: { session: ingestSession(id, ma), receipt: RECEIPT, settlement: { reference: 'ref-a' } },
    });
    expect(first.status, first.text).toBe(201);
    const before = await ordersOf(app, id);

    await expectAllRefused(b, id, mb);
    // The same project in the other mode is another namespace as well.
    const live = await app.key('live', { projectId: a.projectId });
    const order = await app.request('POST', '/v1/ingest/order', {
      key: live,
      body: { session: ingestSession(id, 'mrch_none'), receipt: RECEIPT, settlement: { reference: 'ref-live' } },
    });
    expectError(order, 409, 'SESSION_NOT_INGESTIBLE');

    expect(await ordersOf(app, id)).toEqual(before);
    expect(before[0]!.settlement_ref).toBe('ref-a');
    // The owner still replays its own report.
    const again = await app.request('POST', '/v1/ingest/order', {
      key: a,
      body: { session: ingestSession(id, ma), receipt: RECEIPT, settlement: { reference: 'ref-a' } },
    });
    expect(again.status, again.text).toBe(201);
    expect(again.body.order_id).toBe(first.body.order_id);
  });

  it("GIVEN a session ingested for one merchant WHEN the same project reports it for another merchant THEN 409 (not 500)", async () => {
    const a = await app.key('test');
    const m1 = (await app.request('POST', '/v1/merchants', { key: a, body: merchantBody() })).body.id as string;
    const m2 = (await app.request('POST', '/v1/merchants', { key: a, body: merchantBody() })).body.id as string;
    const id = `sess_${randomUUID().replace(/-/g, '')}`;
    const held = await app.request('POST', '/v1/ingest/decision', {
      key: a,
      body: { session: ingestSession(id, m1, { state: 'held', verdict: { decision: 'hold' } }) },
    });
    expect(held.status, held.text).toBe(200);
    const order = await app.request('POST', '/v1/ingest/order', {
      key: a,
      body: { session: ingestSession(id, m2), receipt: RECEIPT, settlement: { reference: 'ref-2' } },
    });
    expectError(order, 409, 'SESSION_NOT_INGESTIBLE');
    const rows = await sql(app, 'select merchant_id, decision, settlement_ref from orders where session_id = ?', [id]);
    expect(rows).toEqual([{ merchant_id: m1, decision: 'hold', settlement_ref: null }]);
  });

  it('GIVEN two projects racing to ingest one new session id WHEN both report at once THEN one 201 and one 409, never 500', async () => {
    for (let round = 0; round < 5; round++) {
      const keys = [await app.key('test'), await app.key('test')];
      const merchants: string[] = [];
      for (const k of keys) merchants.push((await app.request('POST', '/v1/merchants', { key: k, body: merchantBody() })).body.id);
      const id = `sess_${randomUUID().replace(/-/g, '')}`;
      const results = await Promise.all(
        keys.map((k, i) =>
          app.request('POST', '/v1/ingest/order', {
            key: k,
            body: { session: ingestSession(id, merchants[i]!), receipt: RECEIPT, settlement: { reference: `ref-${i}` } },
          }),
        ),
      );
      expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join('\n')).toEqual([201, 409]);
      expectError(results.find((r) => r.status === 409)!, 409, 'SESSION_NOT_INGESTIBLE');
      expect(await ordersOf(app, id)).toHaveLength(1);
    }
  });
});
