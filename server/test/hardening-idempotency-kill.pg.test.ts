import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { expectError, sql } from './helpers/foundation.js';
import { freePort } from './helpers/spawn.js';

/** PostgreSQL only (a second server process shares the database): runs when DATABASE_URL is set. */
let app: TestApp;
let key: TestKey;

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
});
afterAll(async () => app?.stop());

const post = (idemKey: string, body: unknown) => app.request('POST', '/v1/merchants', { key, body, headers: { 'idempotency-key': idemKey } });

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A second server process on the same database (one process, no tsx wrapper, so SIGKILL really kills it). */
class ServerProcess {
  child: ChildProcess | undefined;
  base = '';

  async start(): Promise<void> {
    if (app.target.kind !== 'postgres') throw new Error('expected a PostgreSQL target');
    const port = await freePort();
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
    Object.assign(env, {
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      HOST: '127.0.0.1',
      PORT: String(port),
      DATABASE_URL: app.target.url,
      SVC_MASTER_KEY: app.config.SVC_MASTER_KEY!,
      SVC_RUN_WORKER: 'false',
    });
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'server/src/main.ts')], { cwd: ROOT, env, stdio: 'ignore' });
    this.child = child;
    this.base = `http://127.0.0.1:${port}`;
    // Up when /healthz answers; a busy machine may take a while (the test's timeout bounds it).
    for (;;) {
      if (child.exitCode !== null) throw new Error(`the second server exited with ${child.exitCode}`);
      if (await fetch(`${this.base}/healthz`).then((r) => r.ok, () => false)) return;
      await sleep(200);
    }
  }

  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
}

/** Retries a request until it is not 409 IDEMPOTENCY_KEY_IN_PROGRESS (a lease still running), at most `tries` times. */
async function untilNotInProgress(send: () => ReturnType<typeof post>, tries: number, pauseMs: number) {
  let res = await send();
  for (let i = 0; i < tries && res.status === 409 && res.body?.reason_codes?.[0] === 'IDEMPOTENCY_KEY_IN_PROGRESS'; i++) {
    await sleep(pauseMs);
    res = await send();
  }
  return res;
}

describe('hardening: kill -9 of a server mid-request (issue 9.2, PostgreSQL)', () => {
  const server = new ServerProcess();
  afterAll(() => server.kill());

  it('GIVEN a second server process killed with SIGKILL while holding an Idempotency-Key WHEN the client retries on the first THEN 409 IN_PROGRESS until the dead lease runs out by itself, then the request runs once', async () => {
    await server.start();
    const body = merchantBody();
    const idemKey = `kill-${ulid()}`;
    const headers = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json', 'idempotency-key': idemKey };
    // Hold the merchants table so the request claims its key, then blocks in the insert.
    let released!: () => void;
    let locked!: () => void;
    const isLocked = new Promise<void>((r) => (locked = r));
    const holding = app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute('lock table merchants in access exclusive mode');
      locked();
      await new Promise<void>((r) => (released = r));
    });
    await isLocked;
    void fetch(`${server.base}/v1/merchants`, { method: 'POST', headers, body: JSON.stringify(body) }).catch(() => undefined);
    while ((await sql(app, 'select 1 from idempotency_keys where idem_key = ?', [idemKey])).length === 0) await sleep(50);
    await server.kill();
    released();
    await holding;
    // As if the process had renewed its lease just before it died: the retry below meets it running.
    await sql(app, "update idempotency_keys set locked_until = now() + interval '15 seconds' where idem_key = ?", [idemKey]);

    expectError(await post(idemKey, body), 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    // Nobody renews the dead process's lease (15 s): it runs out and a retry takes the key over.
    const res = await untilNotInProgress(() => post(idemKey, body), 240, 500);
    expect(res.status, res.text).toBe(201);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(1);
    const replay = await post(idemKey, body);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(res.text);
  }, 240_000);
});

/**
 * One idempotent create of each kind and how to count what it made (exactly one per key): an
 * API key, a product, a merchant, a webhook endpoint and a policy version.
 */
type Create = { method: 'POST' | 'PUT'; path: string; body: unknown; idemKey: string; made: () => Promise<number> };

function createsFor(round: { key: TestKey; merchantId: string }, n: { keys: number; products: number; merchants: number; endpoints: number; policies: number }): Create[] {
  const out: Create[] = [];
  const q = `?merchant_id=${round.merchantId}`;
  for (let i = 0; i < n.keys; i++) {
    const idemKey = `key-${ulid()}`;
    out.push({ method: 'POST', path: '/v1/keys', body: { mode: 'test', name: idemKey, scopes: ['orders:read'] }, idemKey, made: async () => count('select count(*)::int as n from api_keys where name = ?', [idemKey]) });
  }
  for (let i = 0; i < n.products; i++) {
    const idemKey = `product-${ulid()}`;
    const sku = `sku-${ulid().toLowerCase()}`;
    out.push({
      method: 'POST',
      path: `/v1/catalog${q}`,
      body: { sku, name: 'Tea', price: { amount: '3.00', currency: 'USD' } },
      idemKey,
      made: async () => count('select count(*)::int as n from catalog_items where merchant_id = ? and sku = ?', [round.merchantId, sku]),
    });
  }
  for (let i = 0; i < n.merchants; i++) {
    const idemKey = `merchant-${ulid()}`;
    const body = merchantBody();
    out.push({ method: 'POST', path: '/v1/merchants', body, idemKey, made: async () => count('select count(*)::int as n from merchants where slug = ?', [body.slug]) });
  }
  for (let i = 0; i < n.endpoints; i++) {
    const idemKey = `endpoint-${ulid()}`;
    out.push({
      method: 'POST',
      path: '/v1/webhooks/endpoints',
      body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['order.settled'], description: idemKey },
      idemKey,
      made: async () => count('select count(*)::int as n from webhook_endpoints where description = ?', [idemKey]),
    });
  }
  for (let i = 0; i < n.policies; i++) {
    const idemKey = `policy-${ulid()}`;
    out.push({
      method: 'PUT',
      path: `/v1/policy${q}`,
      body: { body: { requireMandateOverUsd: null }, note: idemKey },
      idemKey,
      made: async () => count('select count(*)::int as n from policy_versions where note = ?', [idemKey]),
    });
  }
  return out;
}

async function count(query: string, params: unknown[]): Promise<number> {
  const [row] = await sql<{ n: number }>(app, query, params);
  return Number(row!.n);
}

describe('issue 24.7: kill -9 with idempotent creates in flight (PostgreSQL)', () => {
  const server = new ServerProcess();
  afterEach(() => server.kill());

  it('GIVEN a server killed with SIGKILL while creates with Idempotency-Keys are in flight, round after round, WHEN every key is retried on the surviving server THEN each answers its original status and body and made exactly one resource', async () => {
    const ROUNDS = 8;
    const answeredBeforeKill: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      // A project per round: at most 16 webhook endpoints per project and mode.
      const roundKey = await app.key('test');
      const shop = await app.request('POST', '/v1/merchants', { key: roundKey, body: merchantBody() });
      expect(shop.status, shop.text).toBe(201);
      const creates = createsFor({ key: roundKey, merchantId: shop.body.id }, { keys: 10, products: 10, merchants: 5, endpoints: 8, policies: 5 });
      await server.start();

      // GIVEN creates in flight on the second server
      const original = new Map<string, { status: number; text: string }>();
      let answered = 0;
      let enoughAnswered!: () => void;
      // Kill once a varying share of them has answered: the rest are somewhere in flight.
      const killAfter = 1 + ((round * 7) % Math.floor(creates.length / 2));
      const killPoint = new Promise<void>((r) => (enoughAnswered = r));
      const inFlight = creates.map((c) =>
        fetch(server.base + c.path, {
          method: c.method,
          headers: { authorization: `Bearer ${roundKey.secret}`, 'content-type': 'application/json', 'idempotency-key': c.idemKey },
          body: JSON.stringify(c.body),
        })
          .then(async (res) => {
            const text = await res.text();
            original.set(c.idemKey, { status: res.status, text });
            if (++answered >= killAfter) enoughAnswered();
          })
          .catch(() => undefined),
      );
      await Promise.race([killPoint, Promise.all(inFlight)]);
      // WHEN the process dies
      await server.kill();
      await Promise.all(inFlight);
      answeredBeforeKill.push(original.size);
      // Nobody renews the dead process's leases; let them run out now instead of in 15 s.
      await sql(app, `update idempotency_keys set locked_until = now() - interval '1 second' where scope_key = ? and status is null`, [`${roundKey.projectId}:test`]);

      // THEN every retry (on the surviving server) answers as the first time, and made one resource
      for (const c of creates) {
        const retry = await app.request(c.method, c.path, { key: roundKey, body: c.body, headers: { 'idempotency-key': c.idemKey } });
        const first = original.get(c.idemKey);
        const what = `round ${round}, ${c.method} ${c.path} under ${c.idemKey}: first ${first ? `${first.status} ${first.text}` : 'no answer'}, retry ${retry.status} ${retry.text}`;
        expect(retry.status, what).toBeGreaterThanOrEqual(200);
        expect(retry.status, what).toBeLessThan(300);
        if (first) {
          expect(retry.status, what).toBe(first.status);
          expect(retry.text, what).toBe(first.text);
        }
        expect(await c.made(), what).toBe(1);
      }
    }
    // The kills landed with creates both answered and unanswered.
    expect(answeredBeforeKill.some((n) => n > 0)).toBe(true);
  }, 900_000);
});
