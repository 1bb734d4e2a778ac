import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let key: TestKey;
let merchantId: string;
const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';

const session = (over: Record<string, unknown> = {}) => ({
  id: `sess_${randomUUID().replace(/-/g, '').slice(0, 26)}`,
  merchantId,
  agentId: randomUUID(),
  state: 'accepted',
  verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] },
  total: { currency: 'USD', subtotal: '9.00', tax: '0.00', total: '9.00' },
  lines: [{ sku: 'tea', qty: 3 }],
  railName: 'x402',
  ...over,
});

async function events(sessionId: string) {
  return app.services.orm.em.fork().execute<Array<{ type: string }>>(
    `select type from events where payload->'data'->'object'->>'session_id' = ? order by seq`,
    [sessionId],
  );
}

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  merchantId = (await app.request('POST', '/v1/merchants', { key, body: merchantBody() })).body.id;
});
afterAll(async () => app?.stop());

describe('POST /v1/ingest/session', () => {
  it('GIVEN an anchored session WHEN ingested twice THEN it upserts and reports persisted', async () => {
    const s = session();
    const first = await app.request('POST', '/v1/ingest/session', { key, body: { session: s } });
    expect(first.status, first.text).toBe(200);
    expect(first.body).toEqual({ ok: true, session_id: s.id, persisted: true });
    const second = await app.request('POST', '/v1/ingest/session', { key, body: { session: { ...s, state: 'held' } } });
    expect(second.status).toBe(200);
    const rows = await app.services.orm.em.fork().execute<Array<{ state: string }>>(`select payload->>'state' as state from ingested_sessions where session_id = ?`, [s.id]);
    expect(rows).toEqual([{ state: 'held' }]);
  });

  it('GIVEN an unknown merchant WHEN ingested THEN it succeeds without persisting as anchored', async () => {
    const r = await app.request('POST', '/v1/ingest/session', { key, body: { session: session({ merchantId: 'shop-elsewhere' }) } });
    expect(r.body.persisted).toBe(false);
  });

  it('GIVEN no session.id WHEN ingested THEN 400 VALIDATION_FAILED', async () => {
    const r = await app.request('POST', '/v1/ingest/session', { key, body: { session: { state: 'accepted' } } });
    expect(r.status).toBe(400);
    expect(r.body.reason_codes).toEqual(['VALIDATION_FAILED']);
    expect(r.body.error_human).toContain('session.id');
  });

  it('GIVEN a key without ingest:write WHEN ingesting THEN 403 INSUFFICIENT_SCOPE', async () => {
    const narrow = await app.key('test', { scopes: ['orders:read'], projectId: key.projectId });
    const r = await app.request('POST', '/v1/ingest/session', { key: narrow, body: { session: session() } });
    expect(r.status).toBe(403);
    expect(r.body.reason_codes).toEqual(['INSUFFICIENT_SCOPE']);
  });
});

describe('POST /v1/ingest/order', () => {
  it('GIVEN an anchored accepted session WHEN ingested THEN order, receipt, events and reputation land once', async () => {
    const s = session();
    const r = await app.request('POST', '/v1/ingest/order', { key, body: { session: s, receipt: RECEIPT, settlement: { reference: '0xabc', rail: 'x402' }, fulfillment: { ok: true } } });
    expect(r.status, r.text).toBe(201);
    expect(r.body.order_id).toMatch(/^ord_/);
    expect(r.body.receipt_id).toMatch(/^rcpt_/);
    expect(r.body.event_ids).toHaveLength(2);
    expect(r.body.reputation).toEqual({ agentId: s.agentId, score: 510, tier: 'standard' });
    expect((await events(s.id)).map((e) => e.type)).toEqual(['order.accepted', 'order.settled']);

    const feed = await app.request('GET', '/v1/orders', { key });
    expect(feed.body.data.find((o: any) => o.id === r.body.order_id)).toMatchObject({ session_id: s.id, decision: 'accept', settlement_ref: '0xabc', receipt_id: r.body.receipt_id });

    const again = await app.request('POST', '/v1/ingest/order', { key, body: { session: s, receipt: RECEIPT, settlement: { reference: '0xabc' } } });
    expect(again.status).toBe(201);
    expect(again.body).toEqual({ order_id: r.body.order_id, receipt_id: r.body.receipt_id, event_ids: [], replayed: true });
    expect(await events(s.id)).toHaveLength(2);
    // The report counts in this project's own view only; the shared score of the mode is untouched.
    expect((await app.request('GET', `/v1/reputation/agent/${s.agentId}`, { key })).body).toEqual({ agentId: s.agentId, score: 510, tier: 'standard', known: true });
    const stranger = await app.key('test');
    expect((await app.request('GET', `/v1/reputation/agent/${s.agentId}`, { key: stranger })).body).toEqual({ agentId: s.agentId, score: 500, tier: 'standard', known: false });
  });

  it('GIVEN an unknown merchant WHEN ingested twice THEN only reputation moves, once, and the replay has the reputation-only form', async () => {
    const s = session({ merchantId: 'mrch_00000000000000000000000000' });
    const r = await app.request('POST', '/v1/ingest/order', { key, body: { session: s, receipt: RECEIPT, settlement: { reference: '0xdef' } } });
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ order_id: null, receipt_id: null, event_ids: [], reputation: { agentId: s.agentId, score: 510 } });
    const again = await app.request('POST', '/v1/ingest/order', { key, body: { session: s, receipt: RECEIPT, settlement: { reference: '0xdef' } } });
    expect(again.body).toEqual({ order_id: null, receipt_id: null, event_ids: [], replayed: true, reputation_score: 510 });
    const rows = await app.services.orm.em.fork().execute('select id from orders where session_id = ?', [s.id]);
    expect(rows).toHaveLength(0);
  });

  it('GIVEN a session not accepted or missing WHEN ingested THEN 400 VALIDATION_FAILED', async () => {
    const held = await app.request('POST', '/v1/ingest/order', { key, body: { session: session({ state: 'held' }), receipt: RECEIPT, settlement: { reference: '0x1' } } });
    expect(held.status).toBe(400);
    expect(held.body.error_human).toContain('state');
    const missing = await app.request('POST', '/v1/ingest/order', { key, body: { receipt: RECEIPT, settlement: { reference: '0x1' } } });
    expect(missing.status).toBe(400);
    expect(missing.body.reason_codes).toEqual(['VALIDATION_FAILED']);
  });

  it('GIVEN 10 concurrent reports of one session THEN exactly one order and one delta', async () => {
    const s = session();
    const results = await Promise.all(
      Array.from({ length: 10 }, () => app.request('POST', '/v1/ingest/order', { key, body: { session: s, receipt: RECEIPT, settlement: { reference: '0x9' } } })),
    );
    expect(results.every((r) => r.status === 201)).toBe(true);
    expect(results.filter((r) => r.body.replayed !== true)).toHaveLength(1);
    const rows = await app.services.orm.em.fork().execute('select id from orders where session_id = ?', [s.id]);
    expect(rows).toHaveLength(1);
    expect((await app.request('GET', `/v1/reputation/agent/${s.agentId}`, { key })).body.score).toBe(510);
  });
});

describe('POST /v1/ingest/decision', () => {
  it('GIVEN a hold WHEN ingested THEN order.held fires and the order is listed as hold', async () => {
    const s = session({ state: 'held', verdict: { decision: 'hold', tier: 'cautious', reasonCodes: ['HOLD_FOR_REVIEW'] } });
    const r = await app.request('POST', '/v1/ingest/decision', { key, body: { session: s } });
    expect(r.status, r.text).toBe(200);
    expect(r.body).toMatchObject({ ok: true, decision: 'hold', reputation: { agentId: s.agentId, score: 500 } });
    expect(r.body.event_ids).toHaveLength(1);
    expect((await events(s.id)).map((e) => e.type)).toEqual(['order.held']);
  });

  it('GIVEN a reject WHEN ingested twice THEN order.rejected fires once and the delta applies once', async () => {
    const s = session({ state: 'rejected', verdict: { decision: 'reject', tier: 'standard', reasonCodes: ['OVER_PER_TX_CAP'] } });
    const r = await app.request('POST', '/v1/ingest/decision', { key, body: { session: s } });
    expect(r.body.reputation.score).toBe(485);
    expect((await events(s.id)).map((e) => e.type)).toEqual(['order.rejected']);
    const again = await app.request('POST', '/v1/ingest/decision', { key, body: { session: s } });
    expect(again.body).toMatchObject({ ok: true, decision: 'reject', event_ids: [], replayed: true, reputation: { score: 485 } });
    expect(await events(s.id)).toHaveLength(1);
  });

  it('GIVEN no session or no verdict WHEN ingested THEN 400 VALIDATION_FAILED', async () => {
    expect((await app.request('POST', '/v1/ingest/decision', { key, body: {} })).status).toBe(400);
    const r = await app.request('POST', '/v1/ingest/decision', { key, body: { session: session({ verdict: undefined }) } });
    expect(r.status).toBe(400);
    expect(r.body.error_human).toContain('verdict.decision');
  });

  it('GIVEN a live key WHEN ingesting a test merchant session THEN nothing anchors', async () => {
    const live = await app.key('live', { projectId: key.projectId });
    const s = session({ state: 'rejected', verdict: { decision: 'reject' } });
    const r = await app.request('POST', '/v1/ingest/decision', { key: live, body: { session: s } });
    expect(r.status).toBe(200);
    expect(r.body.event_ids).toEqual([]);
  });
});
