import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { expectError, sql } from './helpers/foundation.js';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, ordersOf, payX402, settle } from './helpers/agent-protocol.js';

/** PostgreSQL only (it stalls a real PostgreSQL connection): runs when DATABASE_URL is set. */
/** A TCP relay to the local PostgreSQL that can freeze: bytes stop flowing both ways, like a SIGSTOPped server. */
class FreezableRelay {
  frozen = false;
  private server!: Server;
  private pairs: Array<{ a: Socket; b: Socket; queued: Array<[Socket, Buffer]> }> = [];
  port = 0;

  async start(targetPort: number) {
    this.server = createServer((client) => {
      const upstream = connect(targetPort, '127.0.0.1');
      const pair = { a: client, b: upstream, queued: [] as Array<[Socket, Buffer]> };
      this.pairs.push(pair);
      const relay = (from: Socket, to: Socket) =>
        from.on('data', (buf) => {
          if (this.frozen) pair.queued.push([to, buf]);
          else to.write(buf);
        });
      relay(client, upstream);
      relay(upstream, client);
      const end = () => {
        client.destroy();
        upstream.destroy();
      };
      client.on('error', end).on('close', end);
      upstream.on('error', end).on('close', end);
    });
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', () => r()));
    this.port = (this.server.address() as { port: number }).port;
  }

  thaw() {
    this.frozen = false;
    for (const p of this.pairs) {
      for (const [to, buf] of p.queued.splice(0)) if (!to.destroyed) to.write(buf);
    }
  }

  async stop() {
    for (const p of this.pairs) {
      p.a.destroy();
      p.b.destroy();
    }
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** GET /v1/merchants until it answers 200 (the pool replaced its dead connections), at most 150 tries. */
async function recovered(app: TestApp, key: TestKey) {
  let res = await app.request('GET', '/v1/merchants', { key });
  for (let i = 0; i < 150 && res.status !== 200; i++) {
    await sleep(200);
    res = await app.request('GET', '/v1/merchants', { key });
  }
  expect(res.status, res.text).toBe(200);
  return res;
}

describe('hardening: a stalled database answers 503 within seconds and recovers (issue 9.5, PostgreSQL)', () => {
  let app: TestApp;
  let key: TestKey;
  beforeAll(async () => {
    app = await TestApp.start({ SVC_DB_STATEMENT_TIMEOUT_MS: '1000', SVC_DB_CONNECT_TIMEOUT_MS: '1000' });
    key = await app.key('test');
  });
  afterAll(async () => app?.stop());

  it('GIVEN a table locked by another transaction WHEN a route needs it THEN 503 DATABASE_UNAVAILABLE within seconds, and 200 once the lock is gone', async () => {
    expect((await app.request('GET', '/v1/merchants', { key })).status).toBe(200);
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute('lock table merchants in access exclusive mode');
      locked();
      await new Promise<void>((r) => (release = r));
    });
    await isLocked;
    try {
      // Answered while the lock is still held (it is released only after).
      const res = await app.request('GET', '/v1/merchants', { key });
      expectError(res, 503, 'DATABASE_UNAVAILABLE');
    } finally {
      release();
      await holding;
    }
    const after = await app.request('GET', '/v1/merchants', { key });
    expect(after.status, after.text).toBe(200);
  });

  it('GIVEN the database stops answering (frozen connection) WHEN requests arrive THEN each answers 503 within seconds, and the service recovers by itself once it answers again', async () => {
    if (app.target.kind !== 'postgres') throw new Error('expected a PostgreSQL target');
    const relay = new FreezableRelay();
    await relay.start(Number(new URL(app.target.url).port || 5432));
    const url = new URL(app.target.url);
    url.hostname = '127.0.0.1';
    url.port = String(relay.port);
    const viaRelay = await TestApp.start(
      { SVC_MASTER_KEY: app.config.SVC_MASTER_KEY!, SVC_DB_STATEMENT_TIMEOUT_MS: '1000', SVC_DB_CONNECT_TIMEOUT_MS: '1000' },
      { target: { kind: 'postgres', url: url.toString(), poolMax: 2 } },
    );
    try {
      expect((await viaRelay.request('GET', '/v1/merchants', { key })).status).toBe(200);
      relay.frozen = true;
      // Answered while the database is still frozen (it thaws only after).
      const stalled = await Promise.all(Array.from({ length: 4 }, () => viaRelay.request('GET', '/v1/merchants', { key })));
      for (const res of stalled) expectError(res, 503, 'DATABASE_UNAVAILABLE');
      relay.thaw();
      expect((await recovered(viaRelay, key)).status).toBe(200);
    } finally {
      relay.thaw();
      await viaRelay.stop();
      await relay.stop();
    }
  }, 120_000);
});

describe('issue 24.11: every request answers 503 within its database budget (SVC_DB_REQUEST_TIMEOUT_MS), queued or not, and leaves nothing half-done (PostgreSQL)', () => {
  let app: TestApp;
  let viaRelay: TestApp;
  let relay: FreezableRelay;
  let key: TestKey;
  beforeAll(async () => {
    app = await TestApp.start();
    key = await app.key('test');
    if (app.target.kind !== 'postgres') throw new Error('expected a PostgreSQL target');
    relay = new FreezableRelay();
    await relay.start(Number(new URL(app.target.url).port || 5432));
    const url = new URL(app.target.url);
    url.hostname = '127.0.0.1';
    url.port = String(relay.port);
    // Statement and connect timeouts far beyond the request budget: only the budget can end these requests.
    viaRelay = await TestApp.start(
      { SVC_MASTER_KEY: app.config.SVC_MASTER_KEY!, SVC_DB_STATEMENT_TIMEOUT_MS: '120000', SVC_DB_CONNECT_TIMEOUT_MS: '120000', SVC_DB_REQUEST_TIMEOUT_MS: '1000' },
      { target: { kind: 'postgres', url: url.toString(), poolMax: 2 } },
    );
  });
  afterAll(async () => {
    relay?.thaw();
    await viaRelay?.stop();
    await relay?.stop();
    await app?.stop();
  });

  /** The pool's connections in use: none once nothing runs (a connection whose request gave up is never kept). */
  async function connectionsInUse(): Promise<number> {
    const pool = (await viaRelay.services.orm.em.getConnection().getNativeClient()) as { totalCount: number; idleCount: number };
    return pool.totalCount - pool.idleCount;
  }

  it('GIVEN a frozen database and a pool of 2 WHEN 8 requests arrive (reads and writes; 6 of them queue for a connection) THEN all answer 503 DATABASE_UNAVAILABLE before the database thaws, none of the writes is there after it, and the service recovers', async () => {
    expect((await viaRelay.request('GET', '/v1/merchants', { key })).status).toBe(200);
    const bodies = Array.from({ length: 4 }, () => merchantBody());
    relay.frozen = true;
    let thawed = false;
    // A safety net only: the requests must answer long before it (their budget is 1 s); if they do not, the database thaws and the test fails below.
    const safetyNet = setTimeout(() => {
      thawed = true;
      relay.thaw();
    }, 45_000);
    try {
      const answered = await Promise.all([
        ...bodies.map((body) => viaRelay.request('POST', '/v1/merchants', { key, body })),
        ...Array.from({ length: 4 }, () => viaRelay.request('GET', '/v1/merchants', { key })),
      ].map((p) => p.then((res) => ({ res, beforeThaw: !thawed }))));
      for (const { res, beforeThaw } of answered) {
        expect(beforeThaw, res.text).toBe(true);
        expectError(res, 503, 'DATABASE_UNAVAILABLE');
      }
    } finally {
      clearTimeout(safetyNet);
      relay.thaw();
    }
    await recovered(viaRelay, key);
    expect(await connectionsInUse()).toBe(0);
    for (const body of bodies) expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toEqual([]);
  }, 120_000);

  /**
   * `request` while another transaction holds `lock` (a LOCK TABLE statement); the lock goes when
   * the request answered, or after a safety net far beyond the 1 s budget. Whether it answered first.
   */
  async function whileLocked<T extends { text: string }>(lock: string, request: () => Promise<T>): Promise<{ res: T; beforeRelease: boolean }> {
    let release!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute(lock);
      locked();
      await new Promise<void>((r) => (release = r));
    });
    await isLocked;
    let released = false;
    const safetyNet = setTimeout(() => {
      released = true;
      release();
    }, 45_000);
    try {
      const res = await request();
      return { res, beforeRelease: !released };
    } finally {
      clearTimeout(safetyNet);
      release();
      await holding;
    }
  }

  it('GIVEN a create whose insert waits on a lock WHEN its budget runs out THEN it answers 503 while the lock is still held, and once the lock is gone the merchant does not exist (its transaction was rolled back, not left to commit)', async () => {
    const body = merchantBody();
    const { res, beforeRelease } = await whileLocked('lock table merchants in share row exclusive mode', () => viaRelay.request('POST', '/v1/merchants', { key, body }));
    expect(beforeRelease, res.text).toBe(true);
    expectError(res, 503, 'DATABASE_UNAVAILABLE');
    // Whatever the server still held of that request is gone: the next create of the same slug is the only one.
    expect((await recovered(viaRelay, key)).status).toBe(200);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toEqual([]);
    const again = await viaRelay.request('POST', '/v1/merchants', { key, body });
    expect(again.status, again.text).toBe(201);
    expect(await connectionsInUse()).toBe(0);
  }, 120_000);

  it('GIVEN a test-mode settle (its one transaction on a bare pooled connection) whose write waits on a lock WHEN its budget runs out THEN 503 while the lock is held, and once it is gone nothing of the settle is there and the same payment settles the session', async () => {
    const shop = await publishedMerchant(viaRelay, { key, policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } });
    // a first settle: the merchant's mode is known, so the next one takes the one transaction
    expect((await payX402(viaRelay, shop.base, await openSession(viaRelay, shop.base, [{ sku: 'coffee', qty: 1 }]), newBuyer())).res.status).toBe(200);
    const s = await openSession(viaRelay, shop.base, [{ sku: 'coffee', qty: 1 }]);
    let payment: unknown;
    const { res, beforeRelease } = await whileLocked('lock table orders in share row exclusive mode', async () => {
      const paid = await payX402(viaRelay, shop.base, s, newBuyer());
      payment = paid.payment;
      return paid.res;
    });
    expect(beforeRelease, res.text).toBe(true);
    expectError(res, 503, 'DATABASE_UNAVAILABLE');
    // rolled back on the server: no order, no replay reservation, the session still awaits its payment
    expect(await ordersOf(app, s.id)).toEqual([]);
    expect(await sql(app, 'select session_id from payment_nonces where session_id = ?', [s.id])).toEqual([]);
    expect(await sql(app, 'select state from checkout_sessions where id = ?', [s.id])).toEqual([{ state: 'awaiting_payment' }]);
    const again = await settle(viaRelay, shop.base, s.id, payment);
    expect(again.status, again.text).toBe(200);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await connectionsInUse()).toBe(0);
  }, 120_000);
});
