import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { agentId, newBuyer, publishedMerchant, signPayment } from './helpers/agent.js';
import { eventTypes, ordersOf } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { merchantBody, TestApp } from './helpers/harness.js';
import { freePort, MAIN, ROOT } from './helpers/spawn.js';
import { createEndpoint, Receiver, waitUntil } from './helpers/webhooks.js';

/**
 * The process model (README "Running in production"): N server processes on one PostgreSQL
 * database. Two separate server processes (A, B: every request is sent to the one named) and a
 * node:cluster of two (SVC_WEB_CONCURRENCY=2) run on the scratch database of an in-process app
 * that only seeds data and reads the rows. PostgreSQL only: runs when DATABASE_URL is set.
 */

const RATE = 4;

type Proc = { child: ChildProcess; base: string; logs: () => string };

async function startServer(app: TestApp, env: Record<string, string>): Promise<Proc> {
  if (app.target.kind !== 'postgres') throw new Error('expected a PostgreSQL target');
  const port = await freePort();
  const full: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('VITEST')) full[k] = v;
  Object.assign(full, {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    PORT: String(port),
    DATABASE_URL: app.target.url,
    SVC_MASTER_KEY: app.config.SVC_MASTER_KEY!,
    SVC_CHECKOUT_RATE_PER_MINUTE: String(RATE),
    SVC_DB_POOL_MAX: '4',
    ...env,
  });
  // node itself with tsx's loader (no wrapper process): the pid is the server's (or the primary's).
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN], { cwd: ROOT, env: full, stdio: ['ignore', 'pipe', 'pipe'] });
  let logs = '';
  child.stdout!.on('data', (b) => (logs += b));
  child.stderr!.on('data', (b) => (logs += b));
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited ${child.exitCode}\n${logs}`);
    if (await fetch(`${base}/healthz`).then((r) => r.ok, () => false)) break;
    if (Date.now() > deadline) throw new Error(`server did not start\n${logs}`);
    await new Promise((r) => setTimeout(r, 250));
  }
  return { child, base, logs: () => logs };
}

async function stopServer(p: Proc | undefined): Promise<number | null> {
  if (!p || p.child.exitCode !== null) return p?.child.exitCode ?? null;
  const exited = new Promise<number | null>((r) => p.child.once('exit', (code) => r(code)));
  p.child.kill('SIGTERM');
  return exited;
}

type Res = { status: number; body: any; headers: Headers };
async function call(base: string, method: string, path: string, opts: { body?: unknown; secret?: string; headers?: Record<string, string> } = {}): Promise<Res> {
  const headers: Record<string, string> = { ...(opts.headers ?? {}) };
  if (opts.secret) headers.authorization = `Bearer ${opts.secret}`;
  if (opts.body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(base + path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
}

/** Node processes whose parent is `pid` (the cluster's server processes). */
function nodeChildren(pid: number): number[] {
  let out = '';
  try {
    out = execFileSync('ps', ['-o', 'pid=,args=', '--ppid', String(pid)], { encoding: 'utf8' });
  } catch {
    return [];
  }
  return out
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l.includes('main.ts'))
    .map((l) => Number(l.split(/\s+/)[0]));
}

let app: TestApp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let a: Proc;
let b: Proc;
let receiver: Receiver;

beforeAll(async () => {
  app = await TestApp.start();
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } });
  receiver = await Receiver.start();
  await createEndpoint(app, shop.key, receiver.url('/hook'), ['order.accepted', 'order.settled']);
  // Both deliver webhooks (SVC_RUN_WORKER defaults to true): two delivery workers on one queue.
  [a, b] = await Promise.all([startServer(app, {}), startServer(app, {})]);
}, 240_000);

afterAll(async () => {
  await Promise.all([stopServer(a), stopServer(b)]);
  await receiver?.close();
  await app?.stop();
});

async function openSession(base: string, agent = agentId()) {
  const res = await call(base, 'POST', `${shop.base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { id: res.body.session_id as string, pr: res.body.payment_required };
}

const settleOn = (base: string, sessionId: string, payment: unknown) => call(base, 'POST', `${shop.base}/agent/checkout/${sessionId}/settle`, { body: payment });

describe('two server processes on one PostgreSQL database', () => {
  const settledSessions: string[] = [];

  it('GIVEN one session WHEN the same signed payment is settled on both processes at once THEN one order, one receipt, one order.settled event; the other process replays the same answer', async () => {
    for (let round = 0; round < 4; round++) {
      const s = await openSession(round % 2 ? b.base : a.base);
      const payment = await signPayment(newBuyer(), s.pr);
      const [ra, rb] = await Promise.all([settleOn(a.base, s.id, payment), settleOn(b.base, s.id, payment)]);
      expect(ra.status, JSON.stringify(ra.body)).toBe(200);
      expect(rb.status, JSON.stringify(rb.body)).toBe(200);
      expect(ra.body.status).toBe('accepted');
      // The loser waited on the session's row lock and replays the winner's stored response.
      expect(rb.body).toEqual(ra.body);
      expect(await ordersOf(app, s.id)).toHaveLength(1);
      expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
      settledSessions.push(s.id);
    }
  });

  it('GIVEN one session WHEN two different payments are settled on the two processes at once THEN exactly one is accepted and the other is 409 SESSION_ALREADY_SETTLED', async () => {
    for (let round = 0; round < 3; round++) {
      const s = await openSession(a.base);
      const [p1, p2] = await Promise.all([signPayment(newBuyer(), s.pr), signPayment(newBuyer(), s.pr)]);
      const answers = await Promise.all([settleOn(a.base, s.id, p1), settleOn(b.base, s.id, p2)]);
      const won = answers.filter((r) => r.status === 200);
      const lost = answers.filter((r) => r.status !== 200);
      expect(won, JSON.stringify(answers.map((r) => [r.status, r.body]))).toHaveLength(1);
      expect(won[0]!.body.status).toBe('accepted');
      expect(lost[0]!.status).toBe(409);
      expect(lost[0]!.body.reason_codes).toEqual(['SESSION_ALREADY_SETTLED']);
      const orders = await ordersOf(app, s.id);
      expect(orders).toHaveLength(1);
      expect(orders[0]!.id).toBe(won[0]!.body.order_id);
      expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
      settledSessions.push(s.id);
    }
  });

  it('GIVEN two delivery workers (one per process) THEN every event of those settles reaches the endpoint exactly once', async () => {
    const events = await sql<{ id: string }>(
      app,
      `select e.payload->>'id' as id from events e where e.payload->'data'->'object'->>'session_id' in (${settledSessions.map(() => '?').join(',')})`,
      settledSessions,
    );
    expect(events).toHaveLength(settledSessions.length * 2);
    await receiver.waitForHits(events.length, '/hook', 60_000);
    // Both workers poll every 500 ms: give a duplicate time to show up.
    await new Promise((r) => setTimeout(r, 2_000));
    const delivered = receiver.on('/hook').map((h) => JSON.parse(h.raw.toString()).id as string);
    expect(delivered.sort()).toEqual(events.map((e) => e.id).sort());
  });

  it('GIVEN an Idempotency-Key used on process A WHEN it is repeated on process B THEN B replays A’s response; two first tries at once create one merchant', async () => {
    const key = shop.key.secret;
    const body = merchantBody();
    const idem = `cross-${ulid()}`;
    const first = await call(a.base, 'POST', '/v1/merchants', { secret: key, body, headers: { 'idempotency-key': idem } });
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await call(b.base, 'POST', '/v1/merchants', { secret: key, body, headers: { 'idempotency-key': idem } });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const reused = await call(b.base, 'POST', '/v1/merchants', { secret: key, body: merchantBody(), headers: { 'idempotency-key': idem } });
    expect(reused.status).toBe(409);
    expect(reused.body.reason_codes).toEqual(['IDEMPOTENCY_KEY_REUSED']);

    const race = merchantBody();
    const raceKey = `race-${ulid()}`;
    const both = await Promise.all([a.base, b.base].map((base) => call(base, 'POST', '/v1/merchants', { secret: key, body: race, headers: { 'idempotency-key': raceKey } })));
    const created = both.filter((r) => r.status === 201 && r.headers.get('idempotent-replayed') === null);
    expect(created, JSON.stringify(both.map((r) => [r.status, r.body]))).toHaveLength(1);
    for (const r of both.filter((x) => x !== created[0])) {
      if (r.status === 201) expect(r.body).toEqual(created[0]!.body);
      else expect([r.status, r.body.reason_codes]).toEqual([409, ['IDEMPOTENCY_KEY_IN_PROGRESS']]);
    }
    expect(await sql(app, 'select id from merchants where slug = ?', [race.slug])).toHaveLength(1);
  });

  it(`GIVEN a checkout limit of ${RATE} per minute WHEN one agent opens sessions on both processes THEN they share one count: the ${RATE + 1}th is 429`, async () => {
    // A fixed one-minute window: start well inside one so the count cannot roll over mid-test.
    const intoMinute = Date.now() % 60_000;
    if (intoMinute > 45_000) await new Promise((r) => setTimeout(r, 61_000 - intoMinute));
    const agent = agentId();
    const bases = [a.base, b.base, a.base, b.base];
    for (const base of bases) await openSession(base, agent);
    const over = await call(b.base, 'POST', `${shop.base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } });
    expect(over.status).toBe(429);
    expect(over.body.reason_codes).toEqual(['RATE_LIMITED']);
    const overA = await call(a.base, 'POST', `${shop.base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } });
    expect(overA.status).toBe(429);
  });
});

describe('SVC_WEB_CONCURRENCY=2 (node:cluster)', () => {
  let cluster: Proc | undefined;
  afterAll(async () => {
    if (cluster && cluster.child.exitCode === null) {
      for (const pid of nodeChildren(cluster.child.pid!)) process.kill(pid, 'SIGKILL');
      cluster.child.kill('SIGKILL');
    }
  });

  it('GIVEN npm start with SVC_WEB_CONCURRENCY=2 THEN the primary runs two server processes that settle one session once; a killed process is restarted; SIGTERM stops them all', async () => {
    cluster = await startServer(app, { SVC_WEB_CONCURRENCY: '2', SVC_RUN_WORKER: 'false' });
    const c = cluster;
    await waitUntil(async () => nodeChildren(c.child.pid!).length === 2 && (c.logs().match(/svc-checkout listening/g) ?? []).length === 2, 'two server processes', 60_000);
    const workers = nodeChildren(c.child.pid!);
    expect(c.logs()).toContain('svc-checkout cluster primary: 2 server processes');

    // The same payment twice at once through the shared port (the primary hands connections out in turn).
    const s = await openSession(c.base);
    const payment = await signPayment(newBuyer(), s.pr);
    const [r1, r2] = await Promise.all([settleOn(c.base, s.id, payment), settleOn(c.base, s.id, payment)]);
    expect([r1.status, r2.status]).toEqual([200, 200]);
    expect(r2.body).toEqual(r1.body);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);

    // A crash (kill -9) of one server process: the primary forks a new one in its slot.
    process.kill(workers[0]!, 'SIGKILL');
    await waitUntil(async () => {
      const now = nodeChildren(c.child.pid!);
      return now.length === 2 && !now.includes(workers[0]!) && (c.logs().match(/svc-checkout listening/g) ?? []).length === 3;
    }, 'a restarted server process', 60_000);
    expect(c.logs()).toMatch(/server process \d exited; restarting it/);
    expect((await fetch(`${c.base}/healthz`)).status).toBe(200);
    const after = nodeChildren(c.child.pid!);

    expect(await stopServer(c)).toBe(0);
    expect(c.logs()).toContain('all server processes stopped');
    for (const pid of after) expect(() => process.kill(pid, 0)).toThrow();
  });
});
