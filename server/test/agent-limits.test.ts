import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, newBuyer, publishedMerchant, signPayment } from './helpers/agent.js';
import { openSession, ordersOf, poll, settle } from './helpers/agent-protocol.js';
import { expectError, onPostgres, sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { startSettlementWorker } from '../src/modules/settlement/reconciler.js';

/** A small per-minute checkout limit and the shortest session lifetime. */
let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start({ SVC_CHECKOUT_RATE_PER_MINUTE: '3', SVC_SESSION_TTL_SECONDS: '30' });
});
afterAll(async () => app?.stop());

describe('checkout rate limit', () => {
  it('GIVEN a limit of 3 per minute WHEN an agent opens a 4th session at one merchant within the minute THEN 429 RATE_LIMITED with Retry-After, counted in the database', async () => {
    const { merchant, base } = await publishedMerchant(app);
    // On PostgreSQL the 2nd and 3rd creates go through a second server process on the same database.
    const other = onPostgres
      ? await TestApp.start({ SVC_CHECKOUT_RATE_PER_MINUTE: '3', SVC_MASTER_KEY: app.config.SVC_MASTER_KEY! }, { target: app.target })
      : app;
    const realNow = app.services.now;
    // Pin the clock 15 s into a minute so the four creates share one fixed window.
    const pinned = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 15_000);
    app.services.now = () => pinned;
    other.services.now = () => pinned;
    try {
      const agent = agentId();
      const body = (i: number) => ({ agent_id: agent, items: [{ sku: 'coffee', qty: 1 }], idempotency_key: `k${i}` });
      const first = await app.request('POST', `${base}/agent/checkout`, { body: body(1) });
      for (const i of [2, 3]) expect((await other.request('POST', `${base}/agent/checkout`, { body: body(i) })).status).toBe(201);

      const fourth = await app.request('POST', `${base}/agent/checkout`, { body: body(4) });
      expectError(fourth, 429, 'RATE_LIMITED');
      expect(fourth.headers.get('retry-after')).toBe('45');
      expect(fourth.headers.get('access-control-expose-headers')).toContain('Retry-After');

      const rows = await sql<{ hits: number; window_start: Date }>(app, 'select hits, window_start from rate_limit_buckets where bucket = ?', [
        `checkout:${merchant.id}:${agent}`,
      ]);
      expect(rows).toHaveLength(1);
      expect(Number(rows[0]!.hits)).toBe(4);
      expect(new Date(rows[0]!.window_start).getTime()).toBe(pinned.getTime() - 15_000);
      expect(await sql(app, 'select id from checkout_sessions where agent_id = ?', [agent])).toHaveLength(3);

      // An idempotent replay is not a new checkout, so it still answers.
      const replay = await app.request('POST', `${base}/agent/checkout`, { body: body(1) });
      expect(replay.status).toBe(201);
      expect(replay.text).toBe(first.text);
      // The limit is per agent and merchant.
      expect((await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } })).status).toBe(201);
      const elsewhere = await publishedMerchant(app);
      expect((await app.request('POST', `${elsewhere.base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } })).status).toBe(201);

      // The next window starts afresh.
      const nextMinute = new Date(pinned.getTime() + 60_000);
      app.services.now = () => nextMinute;
      expect((await app.request('POST', `${base}/agent/checkout`, { body: body(5) })).status).toBe(201);
    } finally {
      app.services.now = realNow;
      if (other !== app) await other.stop();
    }
  });

  it('GIVEN a limit of 3 per minute WHEN one agent opens 10 sessions at once THEN exactly 3 are created', async () => {
    const { base } = await publishedMerchant(app);
    const realNow = app.services.now;
    const pinned = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 20_000);
    app.services.now = () => pinned;
    try {
      const agent = agentId();
      const all = await Promise.all(
        Array.from({ length: 10 }, () => app.request('POST', `${base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } })),
      );
      expect(all.filter((r) => r.status === 201)).toHaveLength(3);
      for (const r of all.filter((x) => x.status !== 201)) expectError(r, 429, 'RATE_LIMITED');
      expect(await sql(app, 'select id from checkout_sessions where agent_id = ?', [agent])).toHaveLength(3);
    } finally {
      app.services.now = realNow;
    }
  });

  it('GIVEN one agent id written in different letter cases WHEN it opens sessions THEN they count against one limit (a UUID is case-insensitive)', async () => {
    const { merchant, base } = await publishedMerchant(app);
    const realNow = app.services.now;
    const pinned = new Date(Math.floor(Date.now() / 60_000) * 60_000 + 30_000);
    app.services.now = () => pinned;
    try {
      const agent = agentId();
      const spellings = [agent, agent.toUpperCase(), agent.replace(/[a-f]/, (c) => c.toUpperCase())];
      for (const id of spellings) {
        expect((await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: id, items: [{ sku: 'coffee', qty: 1 }] } })).status).toBe(201);
      }
      const fourth = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: agent.toUpperCase(), items: [{ sku: 'coffee', qty: 1 }] } });
      expectError(fourth, 429, 'RATE_LIMITED');
      const buckets = await sql(app, 'select bucket from rate_limit_buckets where bucket like ?', [`checkout:${merchant.id}:%`]);
      expect(buckets).toEqual([{ bucket: `checkout:${merchant.id}:${agent}` }]);
    } finally {
      app.services.now = realNow;
    }
  });
});

describe('expired rate-limit windows', () => {
  it('GIVEN windows that started 2 h, 59 min and 1 min ago WHEN the settlement worker runs THEN only the one past the hour of retention is gone, and a checkout sweeps nothing', async () => {
    const now = app.services.now();
    const bucket = `sweep:${agentId()}`;
    const startedAgo = (ms: number) => new Date(now.getTime() - ms);
    for (const ago of [2 * 3_600_000, 59 * 60_000, 60_000]) {
      await sql(app, 'insert into rate_limit_buckets (bucket, window_start, hits) values (?, ?, 1)', [bucket, startedAgo(ago)]);
    }
    const windows = async () =>
      (await sql<{ window_start: Date }>(app, 'select window_start from rate_limit_buckets where bucket = ? order by window_start', [bucket])).map((r) => new Date(r.window_start).getTime());
    // the request path never deletes: many checkouts later all three are there
    const { base } = await publishedMerchant(app);
    for (let i = 0; i < 3; i++) expect((await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } })).status).toBe(201);
    expect(await windows()).toHaveLength(3);
    const worker = startSettlementWorker(app.services, { intervalMs: 3_600_000 });
    await worker.stop(); // its first pass runs at start; stop waits for it
    expect(await windows()).toEqual([startedAgo(59 * 60_000).getTime(), startedAgo(60_000).getTime()]);
  });
});

describe('session expiry', () => {
  it('GIVEN a session past its expires_at WHEN it is settled THEN 410 SESSION_EXPIRED, no order, and the poll shows expired', async () => {
    const { base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null } });
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }]);
    const view = await poll(app, base, s.id);
    expect(s.created.body.expires_at - view.body.createdAt).toBe(30);
    expect(s.pr.validUntil).toBe(s.created.body.expires_at);

    const payment = await signPayment(newBuyer(), s.pr);
    await sql(app, "update checkout_sessions set expires_at = now() - interval '1 second' where id = ?", [s.id]);

    const polledBefore = await poll(app, base, s.id);
    expect(polledBefore.body.state).toBe('expired');
    expect(polledBefore.body.paymentRequired).toBeUndefined();
    expect(polledBefore.body.next).toBeUndefined();

    expectError(await settle(app, base, s.id, payment), 410, 'SESSION_EXPIRED');
    expect(await ordersOf(app, s.id)).toHaveLength(0);
    const polled = await poll(app, base, s.id);
    expect(polled.body.state).toBe('expired');
    const row = await sql<{ state: string }>(app, 'select state from checkout_sessions where id = ?', [s.id]);
    expect(row[0]!.state).toBe('expired');
    // Still expired on a retry, and the nonce was never reserved.
    expectError(await settle(app, base, s.id, payment), 410, 'SESSION_EXPIRED');
    expect(await sql(app, 'select nonce from payment_nonces where session_id = ?', [s.id])).toHaveLength(0);
  });

  it('GIVEN a session inside its lifetime WHEN it is settled THEN it is accepted', async () => {
    const { base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null } });
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }]);
    const res = await settle(app, base, s.id, await signPayment(newBuyer(), s.pr));
    expect(res.status, res.text).toBe(200);
  });
});
