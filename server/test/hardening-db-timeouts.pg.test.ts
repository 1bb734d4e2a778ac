import { createServer, connect, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestApp, type TestKey } from './helpers/harness.js';
import { expectError } from './helpers/foundation.js';

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
      const t0 = Date.now();
      const res = await app.request('GET', '/v1/merchants', { key });
      expectError(res, 503, 'DATABASE_UNAVAILABLE');
      expect(Date.now() - t0).toBeLessThan(4000);
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
      const t0 = Date.now();
      const stalled = await Promise.all(Array.from({ length: 4 }, () => viaRelay.request('GET', '/v1/merchants', { key })));
      for (const res of stalled) expectError(res, 503, 'DATABASE_UNAVAILABLE');
      expect(Date.now() - t0).toBeLessThan(8000);
      relay.thaw();
      const t1 = Date.now();
      let res = await viaRelay.request('GET', '/v1/merchants', { key });
      while (res.status !== 200 && Date.now() - t1 < 10_000) {
        await new Promise((r) => setTimeout(r, 200));
        res = await viaRelay.request('GET', '/v1/merchants', { key });
      }
      expect(res.status, res.text).toBe(200);
    } finally {
      relay.thaw();
      await viaRelay.stop();
      await relay.stop();
    }
  }, 40_000);
});
