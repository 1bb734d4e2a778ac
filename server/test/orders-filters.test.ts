import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Decision, TrustTier } from '@svc/contract';
import { publishedMerchant } from './helpers/agent.js';
import { openSession, settle } from './helpers/agent-protocol.js';
import { expectError } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { ingestOrder as ingestAt } from './helpers/orders.js';

/**
 * GET /v1/orders filters (decision, agent_id, trust_tier, created_gte, created_lt) and
 * GET /v1/events?order_id=. Orders are reported through ingest (the public route that lets a
 * self-hosted gate record any decision and tier) with the injected clock pinned, so each
 * order's created_at is chosen; a few come from the hosted checkout.
 */
let app: TestApp;
let key: TestKey;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let other: Awaited<ReturnType<typeof publishedMerchant>>;
let holdShop: Awaited<ReturnType<typeof publishedMerchant>>;

const AGENT_X = randomUUID();
const AGENT_Y = randomUUID();
const DAY1 = '2026-03-01T10:00:00.000Z';
const DAY2 = '2026-03-02T10:00:00.000Z';
const DAY3 = '2026-03-03T10:00:00.000Z';

type Placed = { id: string; label: string; decision: Decision; tier: TrustTier; agent: string; at: string; merchant: string };
const placed: Placed[] = [];

/** Reports one order through ingest at `at` (the injected clock), as a self-hosted gate would. */
async function ingestOrder(label: string, merchantId: string, decision: Decision, tier: TrustTier, agent: string, at: string) {
  placed.push({ id: await ingestAt(app, key, { merchantId, decision, tier, agent, label, at }), label, decision, tier, agent, at, merchant: merchantId });
}

const ids = (labels: string[]) => placed.filter((p) => labels.includes(p.label)).map((p) => p.id).sort().reverse();
const feedIds = async (query: string) => {
  const res = await app.request('GET', `/v1/orders?limit=100&${query}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.map((o: any) => o.id);
};

beforeAll(async () => {
  app = await TestApp.start();
  const policy = { holdForReviewBelowTier: null, requireMandateOverUsd: null };
  shop = await publishedMerchant(app, { policy });
  key = shop.key;
  other = await publishedMerchant(app, { key, policy });
  // Unknown agents are cautious, below standard: held.
  holdShop = await publishedMerchant(app, { key, policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null } });
  await ingestOrder('a1', shop.merchant.id, 'accept', 'standard', AGENT_X, DAY1);
  await ingestOrder('r2', other.merchant.id, 'reject', 'standard', AGENT_Y, DAY1);
  await ingestOrder('a2', shop.merchant.id, 'accept', 'trusted', AGENT_Y, DAY2);
  await ingestOrder('r1', shop.merchant.id, 'reject', 'cautious', AGENT_X, DAY2);
  await ingestOrder('h1', shop.merchant.id, 'hold', 'cautious', AGENT_Y, DAY3);
  await ingestOrder('a3', other.merchant.id, 'accept', 'premium', AGENT_X, DAY3);
  await ingestOrder('a4', shop.merchant.id, 'accept', 'standard', AGENT_X, DAY3);
});
afterAll(async () => app?.stop());

describe('GET /v1/orders filters', () => {
  it('GIVEN orders of every decision WHEN filtered by decision THEN only that decision, newest first', async () => {
    expect(await feedIds('decision=accept')).toEqual(ids(['a1', 'a2', 'a3', 'a4']));
    expect(await feedIds('decision=reject')).toEqual(ids(['r1', 'r2']));
    expect(await feedIds('decision=hold')).toEqual(ids(['h1']));
    const all = await feedIds('');
    expect(all).toEqual(ids(placed.map((p) => p.label)));
  });

  it('GIVEN two agents WHEN filtered by agent_id THEN only that agent\'s orders; an unknown agent reads empty', async () => {
    expect(await feedIds(`agent_id=${AGENT_X}`)).toEqual(ids(['a1', 'r1', 'a3', 'a4']));
    expect(await feedIds(`agent_id=${AGENT_Y}`)).toEqual(ids(['r2', 'a2', 'h1']));
    expect(await feedIds(`agent_id=${randomUUID()}`)).toEqual([]);
  });

  it('GIVEN orders at four tiers WHEN filtered by trust_tier THEN only that tier', async () => {
    expect(await feedIds('trust_tier=standard')).toEqual(ids(['a1', 'r2', 'a4']));
    expect(await feedIds('trust_tier=cautious')).toEqual(ids(['r1', 'h1']));
    expect(await feedIds('trust_tier=premium')).toEqual(ids(['a3']));
    expect(await feedIds('trust_tier=trusted')).toEqual(ids(['a2']));
  });

  it('GIVEN orders on three days WHEN filtered by created_gte and created_lt THEN the bounds are inclusive and exclusive, offsets included', async () => {
    expect(await feedIds(`created_gte=${DAY2}`)).toEqual(ids(['a2', 'r1', 'h1', 'a3', 'a4']));
    expect(await feedIds(`created_lt=${DAY2}`)).toEqual(ids(['a1', 'r2']));
    expect(await feedIds(`created_gte=${DAY2}&created_lt=${DAY3}`)).toEqual(ids(['a2', 'r1']));
    // DAY2 10:00Z is 12:00+02:00; "+" is sent as %2B.
    expect(await feedIds(`created_gte=${encodeURIComponent('2026-03-02T12:00:00+02:00')}&created_lt=2026-03-02T10:00:00.001Z`)).toEqual(ids(['a2', 'r1']));
    expect(await feedIds('created_gte=2026-03-04T00:00:00Z')).toEqual([]);
  });

  it('GIVEN several filters WHEN combined with merchant_id THEN every one holds', async () => {
    expect(await feedIds(`decision=accept&agent_id=${AGENT_X}`)).toEqual(ids(['a1', 'a3', 'a4']));
    expect(await feedIds(`decision=accept&agent_id=${AGENT_X}&merchant_id=${shop.merchant.id}`)).toEqual(ids(['a1', 'a4']));
    expect(await feedIds(`decision=accept&agent_id=${AGENT_X}&trust_tier=standard&created_gte=${DAY3}`)).toEqual(ids(['a4']));
    expect(await feedIds(`decision=reject&trust_tier=premium`)).toEqual([]);
  });

  it('GIVEN a filtered feed WHEN walked one order per page THEN the cursor keeps the filters: no gaps, no repeats, nothing outside them', async () => {
    const walked: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await app.request('GET', `/v1/orders?limit=1&agent_id=${AGENT_X}${cursor ? `&cursor=${cursor}` : ''}`, { key });
      expect(page.status, page.text).toBe(200);
      walked.push(...page.body.data.map((o: any) => o.id));
      cursor = page.body.next_cursor;
      expect(page.body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(walked).toEqual(ids(['a1', 'r1', 'a3', 'a4']));

    const first = await app.request('GET', `/v1/orders?limit=2&decision=accept&merchant_id=${shop.merchant.id}`, { key });
    expect(first.body.data.map((o: any) => o.id)).toEqual(ids(['a1', 'a2', 'a4']).slice(0, 2));
    const second = await app.request('GET', `/v1/orders?limit=2&decision=accept&merchant_id=${shop.merchant.id}&cursor=${first.body.next_cursor}`, { key });
    expect(second.body).toEqual({ data: [expect.objectContaining({ id: ids(['a1']).at(0), decision: 'accept', trust_tier: 'standard', agent_id: AGENT_X })], has_more: false, next_cursor: null });
  });

  it('GIVEN a bad filter value WHEN the feed is read THEN 400 VALIDATION_FAILED naming it, in the error shape', async () => {
    for (const [q, field] of [
      ['decision=accepted', 'query.decision'],
      ['decision=', 'query.decision'],
      ['trust_tier=elite', 'query.trust_tier'],
      ['created_gte=yesterday', 'query.created_gte'],
      ['created_gte=2026-03-01', 'query.created_gte'],
      ['created_lt=2026-03-01T10:00:00', 'query.created_lt'],
      ['created_lt=2026-13-01T10:00:00Z', 'query.created_lt'],
      ['agent_id=', 'query.agent_id'],
      [`agent_id=${'x'.repeat(201)}`, 'query.agent_id'],
    ]) {
      const res = await app.request('GET', `/v1/orders?${q}`, { key });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, q).toContain(field);
    }
  });

  it('GIVEN filters WHEN another project or the live mode reads THEN they see none of these orders', async () => {
    const stranger = await app.key('test');
    expect(await app.request('GET', `/v1/orders?agent_id=${AGENT_X}`, { key: stranger }).then((r) => r.body)).toEqual({ data: [], has_more: false, next_cursor: null });
    const live = await app.key('live', { projectId: key.projectId });
    expect(await app.request('GET', '/v1/orders?decision=accept', { key: live }).then((r) => r.body.data)).toEqual([]);
  });
});

describe('GET /v1/events?order_id=', () => {
  it('GIVEN a hosted order and a held-then-declined one WHEN events are listed by order_id THEN each order\'s own events, newest first, and the filter combines with type', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    const accepted = await settle(app, shop.base, s.id, { payment: { mock: true } });
    expect(accepted.status, accepted.text).toBe(200);
    const orderId = accepted.body.order_id as string;

    const h = await openSession(app, holdShop.base, [{ sku: 'coffee', qty: 1 }], { rail: 'mock' });
    expect((await settle(app, holdShop.base, h.id, { payment: { mock: true } })).status).toBe(202);
    expect((await app.request('POST', `/v1/sessions/${h.id}/decline`, { key })).status).toBe(200);
    const heldOrderId = (await app.request('GET', `/v1/sessions/${h.id}`, { key })).body.orderId as string;

    const mine = await app.request('GET', `/v1/events?order_id=${orderId}`, { key });
    expect(mine.status, mine.text).toBe(200);
    expect(mine.body.data.map((e: any) => [e.type, e.data.object.id])).toEqual([
      ['order.settled', orderId],
      ['order.accepted', orderId],
    ]);
    expect(mine.body).toMatchObject({ has_more: false, next_cursor: null });

    const held = await app.request('GET', `/v1/events?order_id=${heldOrderId}`, { key });
    expect(held.body.data.map((e: any) => [e.type, e.data.object.id])).toEqual([
      ['order.rejected', heldOrderId],
      ['order.held', heldOrderId],
    ]);
    const onlyHeld = await app.request('GET', `/v1/events?order_id=${heldOrderId}&type=order.held`, { key });
    expect(onlyHeld.body.data.map((e: any) => e.type)).toEqual(['order.held']);

    // Paged one at a time, the cursor keeps the filter.
    const first = await app.request('GET', `/v1/events?order_id=${orderId}&limit=1`, { key });
    const second = await app.request('GET', `/v1/events?order_id=${orderId}&limit=1&cursor=${first.body.next_cursor}`, { key });
    expect([...first.body.data, ...second.body.data].map((e: any) => e.type)).toEqual(['order.settled', 'order.accepted']);
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });

    // The ingested order a1 has its own two events.
    const a1 = placed.find((p) => p.label === 'a1')!.id;
    expect((await app.request('GET', `/v1/events?order_id=${a1}`, { key })).body.data.map((e: any) => e.type)).toEqual(['order.settled', 'order.accepted']);
  });

  it('GIVEN an order id of another project or no order WHEN listed THEN empty; a malformed order_id is 400', async () => {
    const a1 = placed.find((p) => p.label === 'a1')!.id;
    const stranger = await app.key('test');
    expect((await app.request('GET', `/v1/events?order_id=${a1}`, { key: stranger })).body).toEqual({ data: [], has_more: false, next_cursor: null });
    expect((await app.request('GET', '/v1/events?order_id=ord_00000000000000000000000000', { key })).body.data).toEqual([]);
    for (const bad of ['sess_01', 'ord_X', 'whk_00000000000000000000000000']) {
      const res = await app.request('GET', `/v1/events?order_id=${bad}`, { key });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain('query.order_id');
    }
  });
});
