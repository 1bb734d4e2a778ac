import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import pg from 'pg';
import { ulid } from 'ulid';
import type { PrivateKeyAccount } from 'viem/accounts';
import { SCOPES } from '@svc/contract';
import { buildApp } from '../src/app.js';
import { closeServices, createServices } from '../src/boot.js';
import { loadConfig, type Config } from '../src/config.js';
import type { DbTarget } from '../src/db/orm.js';
import { createScratchDatabase } from '../src/db/scratch.js';
import { applyHeapGrowth } from '../src/lib/heap.js';
import { createLogger } from '../src/lib/logger.js';
import { createApiKey, createProject } from '../src/modules/accounts/service.js';
import type { Services } from '../src/services.js';
import { newBuyer, publishedMerchant, signPayment } from '../test/helpers/agent.js';
import { jsonOrText, type ApiResponse, type TestApp } from '../test/helpers/harness.js';
import { countQueries } from '../test/helpers/query-counter.js';
import { freePort, MAIN, ROOT } from '../test/helpers/spawn.js';
import { startBareExpress } from './bare-express.js';
import { ceilingPglite, ceilingPool, pgTransaction, startCeiling } from './ceiling.js';
import { cpuMsOf, postgresPids, treePids, treeRss, type Rss } from './proc.js';

/**
 * `npm run bench -- core`: the figures of issue 15, each beside its baseline measured in the
 * same run, the two interleaved round by round (A B, B A, ...) so a change in the machine's
 * load falls on both. Test-mode settles (mock facilitator) through the agent protocol over
 * HTTP with pre-signed payments; reads with autocannon. Never a test: it prints PASS/MISS
 * against the targets and fails only when a settle under load fails or double-orders.
 */
export type CorePart = 'settle' | 'pglite' | 'reads';
export type CoreBenchOptions = {
  parts: Set<CorePart>;
  /** Fewer requests and shorter rounds: the whole section in well under a minute. */
  quick: boolean;
  /**
   * Serve from `node server/src/main.ts` in its own process (or processes, with whatever
   * process-model variables are set in the environment, e.g. SVC_WEB_CONCURRENCY) instead of
   * an app in the bench's process. PostgreSQL parts only; PGlite is in-process by nature.
   */
  spawn: boolean;
  /**
   * With `spawn`: serve from the compiled server (`node server/dist/main.js`, what
   * `npm run start:prod` runs; `npm run build` first) instead of the TypeScript sources under tsx.
   */
  dist?: boolean;
};
export type CoreReport = { text: string; failures: string[] };

type Sample = { ms: number; ok: boolean; status: number };
type Figures = { n: number; ok: number; seconds: number; perSec: number; p50: number; p99: number; statuses: Record<string, number> };
type Row = { what: string; figure: string; baseline: string; ratio: string; target: string; verdict: 'PASS' | 'MISS' | ''; ceiling?: string; ofCeiling?: string };

const SETTLE_TIMEOUT_MS = 30_000;
const BASELINE_POOL = 16;
const CATALOG_ITEMS = 5;
const COUNTED_SETTLES = 5;
const POLICY = { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 };

const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function figures(samples: Sample[], seconds: number): Figures {
  const okMs = samples.filter((s) => s.ok).map((s) => s.ms).sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const s of samples) if (!s.ok) statuses[String(s.status)] = (statuses[String(s.status)] ?? 0) + 1;
  return { n: samples.length, ok: okMs.length, seconds, perSec: okMs.length / seconds, p50: pct(okMs, 50), p99: pct(okMs, 99), statuses };
}

/** `concurrency` loops; each takes the next unit of work until `more()` says stop; one sample per unit. */
async function drive(concurrency: number, more: (i: number) => boolean, one: (worker: number, i: number) => Promise<{ ok: boolean; status: number }>): Promise<{ samples: Sample[]; seconds: number }> {
  const samples: Sample[] = [];
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = next++; more(i); i = next++) {
        const t0 = performance.now();
        let r: { ok: boolean; status: number };
        try {
          r = await one(w, i);
        } catch {
          r = { ok: false, status: 0 };
        }
        samples.push({ ms: performance.now() - t0, ...r });
      }
    }),
  );
  return { samples, seconds: (performance.now() - started) / 1000 };
}

// ---------------------------------------------------------------------------------------------
// HTTP: a lean keep-alive client for the timed requests (fetch costs the shared event loop more)

type Post = (path: string, body: unknown) => Promise<{ status: number; body: any }>;

function httpPoster(baseUrl: string, sockets: number): { post: Post; close: () => void } {
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  const u = new URL(baseUrl);
  const post: Post = (path, body) =>
    new Promise((resolve, reject) => {
      const payload = JSON.stringify(body);
      const req = http.request(
        { host: u.hostname, port: u.port, method: 'POST', path, agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            resolve({ status: res.statusCode ?? 0, body: jsonOrText(Buffer.concat(chunks).toString('utf8')) });
          });
          res.on('error', reject);
        },
      );
      req.setTimeout(SETTLE_TIMEOUT_MS, () => req.destroy(new Error('timeout')));
      req.on('error', reject);
      req.end(payload);
    });
  return { post, close: () => agent.destroy() };
}

/** What `publishedMerchant` needs of a TestApp, over fetch against any server on `services`' database. */
function setupClient(baseUrl: string, services: Services): Pick<TestApp, 'key' | 'request'> {
  return {
    async key(mode = 'test') {
      const em = services.orm.em.fork();
      const project = await createProject(em, `bench-${ulid()}`, { now: services.now() });
      const { key, secret } = await createApiKey(em, { projectId: project.id, mode, scopes: [...SCOPES], now: services.now() });
      return { id: key.id, secret, projectId: project.id, mode };
    },
    async request<T = any>(method: string, path: string, opts: Parameters<TestApp['request']>[2] = {}): Promise<ApiResponse<T>> {
      const headers: Record<string, string> = { ...(opts.headers ?? {}) };
      if (opts.key) headers.authorization = `Bearer ${typeof opts.key === 'string' ? opts.key : opts.key.secret}`;
      if (opts.body !== undefined) headers['content-type'] = 'application/json';
      const res = await fetch(baseUrl + path, { method, headers, body: opts.body === undefined ? undefined : JSON.stringify(opts.body) });
      const text = await res.text();
      return { status: res.status, body: jsonOrText(text) as T, headers: res.headers, text };
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Servers: the app in this process, or main.ts in its own

type Env = {
  services: Services;
  /** Where the timed requests go. */
  url: string;
  /** An app on `services` in this process (the same as `url` unless spawned): statement counting needs the ORM in hand. */
  localUrl: string;
  /** This process's RSS, or the VmRSS of the spawned server's process tree. */
  serverRss: () => Rss;
  /** The server's processes: the spawned tree, or none when the server runs in the bench's process. */
  serverPids: () => number[];
  describe: string;
  stop: () => Promise<void>;
};

function benchConfigEnv(): Record<string, string> {
  // the operator's SVC_* settings (pool size, process model) apply to the bench's server too
  const passed = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[0].startsWith('SVC_') && e[1] !== undefined));
  return {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    SVC_DATA_DIR: join(tmpdir(), `svc-bench-core-${ulid()}`),
    ...passed,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_CHECKOUT_RATE_PER_MINUTE: '100000',
  };
}

async function listenLocal(services: Services): Promise<{ server: Server; url: string }> {
  const app = buildApp(services);
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
}

async function closeServer(server: Server) {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

/** Cumulative CPU ms of the server (spawned processes; 0 in-process), this machine's PostgreSQL and the bench's own process. */
type CpuSpent = { server: number; postgres: number; bench: number };
type CpuProbe = () => CpuSpent;
function cpuProbe(env: Pick<Env, 'serverPids'>): CpuProbe {
  return () => {
    const own = process.cpuUsage();
    return { server: cpuMsOf(env.serverPids()), postgres: cpuMsOf(postgresPids()), bench: (own.user + own.system) / 1000 };
  };
}
const addCpu = (into: CpuSpent, a: CpuSpent, b: CpuSpent) => {
  into.server += b.server - a.server;
  into.postgres += b.postgres - a.postgres;
  into.bench += b.bench - a.bench;
};

/** Runs an entry point under this Node (a TypeScript one with tsx's loader), so the pid is the program's own. */
async function spawnTs(script: string, env: Record<string, string>, readyUrl: (port: number) => string): Promise<{ child: ChildProcess; port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  // BENCH_PROFILE=<dir>: the spawned server writes a V8 CPU profile there when it exits (SIGTERM)
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const loader = script.endsWith('.ts') ? ['--import', 'tsx'] : [];
  const child = spawn(process.execPath, [...profile, ...loader, script], { cwd: ROOT, env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (b) => (stderr = (stderr + b).slice(-4000)));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const killer = setTimeout(() => child.kill('SIGKILL'), 15_000);
    await exited;
    clearTimeout(killer);
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${script} exited with ${child.exitCode}: ${stderr}`);
    try {
      const res = await fetch(readyUrl(port), { signal: AbortSignal.timeout(1000) });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      /* not listening yet */
    }
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`${script} not ready after 60 s: ${stderr}`);
    }
    await sleep(100);
  }
  return { child, port, stop };
}

async function startPostgresEnv(adminUrl: string, opts: CoreBenchOptions): Promise<Env & { target: Extract<DbTarget, { kind: 'postgres' }> }> {
  const envVars = benchConfigEnv();
  // this process is one server (in-process) or only sets up and checks (spawned): a process model is the spawned server's
  const config: Config = loadConfig({ ...envVars, SVC_WEB_CONCURRENCY: '1' });
  // the bench's own pool is small when a spawned server serves: it only sets up and checks
  const scratch = await createScratchDatabase(adminUrl, 'svc_bench_core', opts.spawn ? 4 : config.SVC_DB_POOL_MAX);
  const target = scratch.target as Extract<DbTarget, { kind: 'postgres' }>;
  const services = await createServices(config, { target, log: createLogger(config.LOG_LEVEL) });
  const local = await listenLocal(services);
  if (!opts.spawn) {
    return {
      services,
      target,
      url: local.url,
      localUrl: local.url,
      serverRss: () => ({ total: process.memoryUsage().rss, largest: process.memoryUsage().rss, processes: 1 }),
      serverPids: () => [],
      describe: `in-process server (pool ${config.SVC_DB_POOL_MAX})`,
      stop: async () => {
        await closeServer(local.server);
        await closeServices(services, { force: true });
        await scratch.drop();
      },
    };
  }
  const script = opts.dist ? join(ROOT, 'server/dist/main.js') : MAIN;
  if (opts.dist && !existsSync(script)) throw new Error('bench --dist: server/dist/main.js is missing; run `npm run build` first');
  const spawned = await spawnTs(script, { ...envVars, DATABASE_URL: target.url }, (port) => `http://127.0.0.1:${port}/healthz`);
  const model = Object.entries(envVars).filter(([k]) => /CONCURRENCY|PROCESSES|WORKERS|THREADS/.test(k)).map(([k, v]) => `${k}=${v}`).join(' ');
  return {
    services,
    target,
    url: `http://127.0.0.1:${spawned.port}`,
    localUrl: local.url,
    serverRss: () => treeRss(spawned.child.pid!),
    serverPids: () => treePids(spawned.child.pid!),
    describe: `spawned server (node ${opts.dist ? 'server/dist/main.js' : 'server/src/main.ts'}${model ? `, ${model}` : ''}, pool ${config.SVC_DB_POOL_MAX})`,
    stop: async () => {
      await spawned.stop();
      await closeServer(local.server);
      await closeServices(services, { force: true });
      await scratch.drop();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Settles: sessions opened and payments signed before the clock starts

type Shop = { base: string; merchantId: string };
type Job = { path: string; body: unknown };

async function publishShop(env: Pick<Env, 'services' | 'localUrl'>, products = [{ sku: 'coffee', amount: '4.50' }]): Promise<Shop> {
  const shop = await publishedMerchant(setupClient(env.localUrl, env.services), { policy: POLICY, products });
  return { base: shop.base, merchantId: shop.merchant.id };
}

/** `n` open sessions, each with its payment signed (buyers taken in turn), ready to settle. */
async function prepareSettles(post: Post, shop: Shop, n: number, buyers: PrivateKeyAccount[]): Promise<Job[]> {
  const jobs: Job[] = new Array(n);
  const { samples } = await drive(
    8,
    (i) => i < n,
    async (_w, i) => {
      const created = await post(`${shop.base}/agent/checkout`, { agent_id: randomUUID(), items: [{ sku: 'coffee', qty: 1 }] });
      if (created.status !== 201) throw new Error(`checkout: ${created.status} ${JSON.stringify(created.body)}`);
      // valid for an hour: a slow machine may take minutes to reach the last prepared settle
      const payment = await signPayment(buyers[i % buyers.length]!, created.body.payment_required, { validBefore: Math.floor(Date.now() / 1000) + 3600 });
      jobs[i] = { path: `${shop.base}/agent/checkout/${created.body.session_id}/settle`, body: payment };
      return { ok: true, status: 201 };
    },
  );
  const bad = samples.filter((s) => !s.ok).length;
  if (bad) throw new Error(`${bad} of ${n} checkouts failed while preparing settles`);
  return jobs;
}

async function settleBatch(post: Post, jobs: Job[], concurrency: number) {
  return drive(
    concurrency,
    (i) => i < jobs.length,
    async (_w, i) => {
      const res = await post(jobs[i]!.path, jobs[i]!.body);
      return { ok: res.status === 200 && res.body?.status === 'accepted', status: res.status };
    },
  );
}

// ---------------------------------------------------------------------------------------------
// The settle-shaped transaction: BEGIN; SELECT ... FOR UPDATE; INSERT order; INSERT receipt;
// INSERT event; UPDATE session; COMMIT. Each loop settles its own session row, as an agent does.

const SHAPED_DDL = [
  'create table if not exists bench_sessions (id text primary key, state text not null, order_id text, updated_at timestamptz not null default now())',
  'create table if not exists bench_orders (id text primary key, session_id text not null references bench_sessions(id), total numeric not null, created_at timestamptz not null default now())',
  'create table if not exists bench_receipts (id text primary key, order_id text not null references bench_orders(id), jws text not null)',
  'create table if not exists bench_events (id text primary key, type text not null, payload jsonb not null, created_at timestamptz not null default now())',
];
const SHAPED = {
  lock: 'select id, state from bench_sessions where id = $1 for update',
  order: 'insert into bench_orders (id, session_id, total) values ($1, $2, $3)',
  receipt: 'insert into bench_receipts (id, order_id, jws) values ($1, $2, $3)',
  event: 'insert into bench_events (id, type, payload) values ($1, $2, $3)',
  update: "update bench_sessions set state = 'accepted', order_id = $2, updated_at = now() where id = $1",
};
const JWS = 'x'.repeat(600);
const EVENT = JSON.stringify({ type: 'order.created', data: { object: { order_id: 'ord', total: '4.50', items: [{ sku: 'coffee', qty: 1 }], note: 'y'.repeat(600) } } });
type Query = (sql: string, params?: unknown[]) => Promise<unknown>;

async function shapedStatements(query: Query, session: string) {
  const order = `ord_${randomUUID()}`;
  await query(SHAPED.lock, [session]);
  await query(SHAPED.order, [order, session, '4.50']);
  await query(SHAPED.receipt, [`rcpt_${randomUUID()}`, order, JWS]);
  await query(SHAPED.event, [`evt_${randomUUID()}`, 'order.created', EVENT]);
  await query(SHAPED.update, [session, order]);
}

type Shaped = { run: (worker: number) => Promise<void>; close: () => Promise<void> };

async function shapedOnPostgres(url: string, workers: number): Promise<Shaped> {
  const pool = new pg.Pool({ connectionString: url, max: BASELINE_POOL });
  for (const ddl of SHAPED_DDL) await pool.query(ddl);
  await pool.query("insert into bench_sessions (id, state) select 'w' || g, 'open' from generate_series(0, $1::int - 1) g on conflict do nothing", [workers]);
  return {
    run: (worker) => pgTransaction(pool, (client) => shapedStatements((sql, params) => client.query(sql, params), `w${worker}`)),
    close: () => pool.end(),
  };
}

/** PGlite as @mikro-orm/pglite holds it (the same instance the server's ORM uses; its transactions take turns). */
type PgliteLike = { query: Query; transaction: <T>(cb: (tx: { query: Query }) => Promise<T>) => Promise<T> };

async function shapedOnPglite(db: PgliteLike, workers: number): Promise<Shaped> {
  for (const ddl of SHAPED_DDL) await db.query(ddl);
  await db.query("insert into bench_sessions (id, state) select 'w' || g, 'open' from generate_series(0, $1::int - 1) g on conflict do nothing", [workers]);
  return {
    run: (worker) => db.transaction((tx) => shapedStatements((sql, params) => tx.query(sql, params), `w${worker}`)),
    close: async () => undefined,
  };
}

async function shapedFor(shaped: Shaped, concurrency: number, seconds: number) {
  const until = performance.now() + seconds * 1000;
  return drive(
    concurrency,
    () => performance.now() < until,
    async (w) => {
      await shaped.run(w);
      return { ok: true, status: 200 };
    },
  );
}

// ---------------------------------------------------------------------------------------------
// One settle comparison: rounds of (our settles, the shaped transaction), order alternating

type Compared = { ours: Figures; base: Figures; ceiling?: Figures; rss: Rss; cpu: { ours: CpuSpent; base: CpuSpent } };
/** The ceiling handler (./ceiling.ts) and its own prepared settles, run beside ours in every round. */
type CeilingRun = { post: Post; jobs: Job[] };

async function compareSettles(
  post: Post,
  jobs: Job[],
  shaped: Shaped,
  concurrency: number,
  rounds: number,
  baseSeconds: number,
  rss?: () => Rss,
  cpu?: CpuProbe,
  ceiling?: CeilingRun,
): Promise<Compared> {
  const ceil: Sample[] = [];
  let ceilSeconds = 0;
  const spent = { ours: { server: 0, postgres: 0, bench: 0 }, base: { server: 0, postgres: 0, bench: 0 } };
  const ours: Sample[] = [];
  const base: Sample[] = [];
  let oursSeconds = 0;
  let baseSecondsTotal = 0;
  const rssMax: Rss = { total: 0, largest: 0, processes: 0 };
  const sampleRss = () => {
    const now = rss!();
    rssMax.total = Math.max(rssMax.total, now.total);
    rssMax.largest = Math.max(rssMax.largest, now.largest);
    rssMax.processes = Math.max(rssMax.processes, now.processes);
  };
  const per = Math.ceil(jobs.length / rounds);
  for (let r = 0; r < rounds; r++) {
    const slice = jobs.slice(r * per, (r + 1) * per);
    const runOurs = async () => {
      const timer = rss ? setInterval(sampleRss, 100) : undefined;
      const before = cpu?.();
      try {
        const res = await settleBatch(post, slice, concurrency);
        ours.push(...res.samples);
        oursSeconds += res.seconds;
      } finally {
        clearInterval(timer);
      }
      if (cpu) addCpu(spent.ours, before!, cpu());
      if (rss) sampleRss();
    };
    const runBase = async () => {
      const before = cpu?.();
      const res = await shapedFor(shaped, concurrency, baseSeconds);
      if (cpu) addCpu(spent.base, before!, cpu());
      base.push(...res.samples);
      baseSecondsTotal += res.seconds;
    };
    const runCeiling = async () => {
      if (!ceiling) return;
      const res = await settleBatch(ceiling.post, ceiling.jobs.slice(r * per, (r + 1) * per), concurrency);
      ceil.push(...res.samples);
      ceilSeconds += res.seconds;
    };
    if (r % 2 === 0) {
      await runOurs();
      await runCeiling();
      await runBase();
    } else {
      await runBase();
      await runCeiling();
      await runOurs();
    }
  }
  return { ours: figures(ours, oursSeconds), base: figures(base, baseSecondsTotal), ...(ceiling ? { ceiling: figures(ceil, ceilSeconds) } : {}), rss: rssMax, cpu: spent };
}

// ---------------------------------------------------------------------------------------------
// Reads: autocannon against the manifest, its 304 and the catalog, and a bare Express GET

type Cannon = { reqPerSec: number; p50: number; p99: number; bad: number; total: number; seconds: number };

async function cannon(url: string, seconds: number, expect: 200 | 304, headers: Record<string, string> = {}): Promise<Cannon> {
  // one worker thread generates the load, so an in-process server keeps the main thread to itself
  const r = await autocannon({ url, connections: 32, duration: seconds, headers, workers: 1 });
  const good = expect === 200 ? r['2xx'] : r['3xx'];
  const total = r['1xx'] + r['2xx'] + r['3xx'] + r['4xx'] + r['5xx'];
  return { reqPerSec: good / r.duration, p50: r.latency.p50, p99: r.latency.p99, bad: total - good + r.errors, total, seconds: r.duration };
}

const addCannon = (a: Cannon | undefined, b: Cannon): Cannon =>
  a
    ? {
        reqPerSec: (a.reqPerSec * a.seconds + b.reqPerSec * b.seconds) / (a.seconds + b.seconds),
        p50: Math.max(a.p50, b.p50),
        p99: Math.max(a.p99, b.p99),
        bad: a.bad + b.bad,
        total: a.total + b.total,
        seconds: a.seconds + b.seconds,
      }
    : b;

// ---------------------------------------------------------------------------------------------
// The section

const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
const f2 = (x: number) => (Number.isFinite(x) ? x.toFixed(2) : '-');
const percent = (a: number, b: number) => (b > 0 && Number.isFinite(a) ? `${((100 * a) / b).toFixed(0)}%` : '-');
const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');
const settleText = (f: Figures) => `${f0(f.perSec)}/s p50 ${f1(f.p50)} ms p99 ${f1(f.p99)} ms`;
const failText = (f: Figures) => Object.entries(f.statuses).map(([s, k]) => `${k}x ${s === '0' ? 'error' : s}`).join(', ');

async function doubleOrders(services: Services): Promise<number> {
  const rows = (await services.orm.em.fork().execute('select count(*)::int as n from (select session_id from orders group by session_id having count(*) > 1) d')) as Array<{ n: number }>;
  return Number(rows[0]!.n);
}

function table(rows: Row[]): string {
  const head: Row = { what: 'what', figure: 'figure', ceiling: 'ceiling handler, same run', ofCeiling: 'of ceiling', baseline: 'raw txn, same run', ratio: 'of raw', target: 'target', verdict: '' };
  rows = rows.map((r) => ({ ...r, ceiling: r.ceiling ?? '', ofCeiling: r.ofCeiling ?? '' }));
  const keys = ['what', 'figure', 'ceiling', 'ofCeiling', 'baseline', 'ratio', 'target', 'verdict'] as const;
  const widths = keys.map((k) => Math.max(...[head, ...rows].map((r) => (r[k] ?? '').length)));
  const line = (r: Row) => '  ' + keys.map((k, i) => (k === 'what' || k === 'figure' || k === 'baseline' || k === 'ceiling' ? (r[k] ?? '').padEnd(widths[i]!) : (r[k] ?? '').padStart(widths[i]!))).join('  ').trimEnd();
  return [line(head), ...rows.map(line)].join('\n');
}

/**
 * Where a settle's CPU goes at 32 agents: the server, PostgreSQL (every `postgres` process on
 * this machine) and the load generator, per settle; the baseline's PostgreSQL and client per
 * shaped transaction. In-process, the server and the load generator are one process.
 */
function cpuRow(c: Compared, spawned: boolean): Row {
  const per = (ms: number, n: number) => f2(n ? ms / n : NaN);
  const ours = c.cpu.ours;
  const pgHere = ours.postgres > 0;
  const figure = spawned
    ? `server ${per(ours.server, c.ours.n)}, PostgreSQL ${pgHere ? per(ours.postgres, c.ours.n) : 'n/a'}, load generator ${per(ours.bench, c.ours.n)} ms`
    : `server + load generator ${per(ours.bench, c.ours.n)}, PostgreSQL ${pgHere ? per(ours.postgres, c.ours.n) : 'n/a'} ms`;
  const base = c.cpu.base;
  return {
    what: 'CPU per settle at 32 agents (per txn for the baseline)',
    figure,
    baseline: `PostgreSQL ${pgHere ? per(base.postgres, c.base.n) : 'n/a'}, client ${per(base.bench, c.base.n)} ms`,
    ratio: '',
    target: '',
    verdict: '',
  };
}

export async function benchCore(opts: CoreBenchOptions): Promise<CoreReport> {
  const started = performance.now();
  const rows: Row[] = [];
  const notes: string[] = [];
  const failures: string[] = [];
  const q = opts.quick;
  const adminUrl = process.env.DATABASE_URL;
  // An in-process server (and the PGlite part's) lives in this process: its heap as the server sets it.
  applyHeapGrowth(loadConfig({ ...benchConfigEnv(), SVC_WEB_CONCURRENCY: '1' }).SVC_HEAP_GROWTH_PERCENT);
  // settles per concurrency level, rounds, and seconds of the shaped transaction per round
  const plan = q
    ? { levels: [[1, 24], [8, 96], [32, 192]] as const, rounds: 2, baseSeconds: 1, readSeconds: 1, readRounds: 2, pgliteSettles: 96 }
    : { levels: [[1, 100], [8, 400], [32, 960]] as const, rounds: 4, baseSeconds: 1.5, readSeconds: 2, readRounds: 3, pgliteSettles: 400 };

  const wantPg = opts.parts.has('settle') || opts.parts.has('reads');
  if (wantPg && !adminUrl) notes.push('settle and reads need PostgreSQL: set DATABASE_URL (e.g. postgresql://postgres@127.0.0.1:5432/test); skipped');
  let describe = '';
  if (wantPg && adminUrl) {
    const env = await startPostgresEnv(adminUrl, opts);
    describe = `${env.describe}, signer recovery ${env.services.signers.mode}`;
    try {
      if (opts.parts.has('settle')) {
        const shop = await publishShop(env);
        const buyers = Array.from({ length: 32 }, () => newBuyer());
        const client = httpPoster(env.url, 64);
        const shaped = await shapedOnPostgres(env.target.url, 32);
        // the ceiling handler (./ceiling.ts) on the same database, with the server's pool size
        const ceiling = await startCeiling(env.services, ceilingPool(env.target.url, env.services.config.SVC_DB_POOL_MAX));
        const ceilingClient = httpPoster(ceiling.url, 64);
        let accepted = 0;
        try {
          // warm-up: the merchant's caches, the pools' connections, the JIT
          const warm = await settleBatch(client.post, await prepareSettles(client.post, shop, 32, buyers), 8);
          accepted += warm.samples.filter((s) => s.ok).length;
          if (warm.samples.some((s) => !s.ok)) failures.push(`warm-up settles: ${warm.samples.filter((s) => !s.ok).length} of ${warm.samples.length} failed`);
          await shapedFor(shaped, 8, 0.5);
          await settleBatch(ceilingClient.post, await prepareSettles(client.post, shop, 32, buyers), 8);
          for (const [agents, n] of plan.levels) {
            const jobs = await prepareSettles(client.post, shop, n, buyers);
            const ceilingRun = { post: ceilingClient.post, jobs: await prepareSettles(client.post, shop, n, buyers) };
            const c = await compareSettles(client.post, jobs, shaped, agents, plan.rounds, plan.baseSeconds, agents === 32 ? env.serverRss : undefined, agents === 32 ? cpuProbe(env) : undefined, ceilingRun);
            if (c.ceiling && c.ceiling.ok !== c.ceiling.n) failures.push(`ceiling handler at ${agents} agents: ${c.ceiling.n - c.ceiling.ok} of ${c.ceiling.n} failed (${failText(c.ceiling)})`);
            const ofCeiling = c.ceiling ? c.ours.perSec / c.ceiling.perSec : 0;
            accepted += c.ours.ok;
            if (c.ours.ok !== c.ours.n) failures.push(`settle at ${agents} agent${agents > 1 ? 's' : ''}: ${c.ours.n - c.ours.ok} of ${c.ours.n} failed (${failText(c.ours)})`);
            const target =
              agents === 32
                ? { text: '>= 90% of ceiling, p99 < 100 ms', ok: ofCeiling >= 0.9 && c.ours.p99 < 100 }
                : agents === 1
                  ? { text: 'p99 < 15 ms', ok: c.ours.p99 < 15 }
                  : null;
            rows.push({
              what: `settle, PostgreSQL, ${agents} agent${agents > 1 ? 's' : ''} (n=${c.ours.n})`,
              figure: settleText(c.ours),
              ...(c.ceiling ? { ceiling: settleText(c.ceiling), ofCeiling: percent(c.ours.perSec, c.ceiling.perSec) } : {}),
              baseline: settleText(c.base),
              ratio: percent(c.ours.perSec, c.base.perSec),
              target: target?.text ?? '',
              verdict: target ? verdict(target.ok) : '',
            });
            if (agents === 32) {
              // the target is per server process: the largest one (the bench's own process when in-process)
              const mib = c.rss.largest / 2 ** 20;
              const sum = c.rss.processes > 1 ? ` (${c.rss.processes} processes, ${f0(c.rss.total / 2 ** 20)} MiB in all)` : '';
              rows.push({ what: `server RSS, max under the 32-agent settles${opts.spawn ? '' : ' (with the bench)'}`, figure: `${f0(mib)} MiB${sum}`, baseline: '', ratio: '', target: '< 250 MiB', verdict: verdict(mib < 250) });
              rows.push(cpuRow(c, Boolean(opts.spawn)));
            }
          }

          // statements per settle, counted on the ORM's connection of an in-process app
          const counted = await prepareSettles(client.post, shop, COUNTED_SETTLES + 1, buyers);
          const local = httpPoster(env.localUrl, 1);
          // one settle first, uncounted: the local app learns the merchant's mode (a spawned server's settles taught it nothing)
          await settleBatch(local.post, counted.splice(0, 1), 1);
          const counter = await countQueries(env.services.orm);
          let res;
          try {
            res = await settleBatch(local.post, counted, 1);
          } finally {
            counter.stop();
            local.close();
          }
          accepted += res.samples.filter((s) => s.ok).length;
          if (res.samples.some((s) => !s.ok)) failures.push('a counted settle failed');
          const perSettle = counter.count / COUNTED_SETTLES;
          rows.push({
            what: 'SQL statements per settle (BEGIN/COMMIT included)',
            figure: f1(perSettle),
            baseline: '7 (shaped txn)',
            ratio: `${(perSettle / 7).toFixed(1)}x`,
            target: '<= 5',
            verdict: verdict(perSettle <= 5),
          });
        } finally {
          client.close();
          ceilingClient.close();
          await ceiling.close();
          await shaped.close();
        }
        const doubles = await doubleOrders(env.services);
        if (doubles) failures.push(`${doubles} session(s) with two orders`);
        const orders = (await env.services.orm.em.fork().execute('select count(*)::int as n from orders where merchant_id = ?', [shop.merchantId])) as Array<{ n: number }>;
        notes.push(`PostgreSQL settles: ${accepted} accepted, ${Number(orders[0]!.n)} orders in the database, ${doubles} session(s) with two orders`);
      }

      if (opts.parts.has('reads')) {
        const products = Array.from({ length: CATALOG_ITEMS }, (_, i) => ({ sku: `item-${i}`, amount: `${i + 1}.00` }));
        const shop = await publishShop(env, products);
        const manifestUrl = `${env.url}${shop.base}/.well-known/agentic-checkout.json`;
        const catalogUrl = `${env.url}${shop.base}/agent/catalog`;
        const first = await fetch(manifestUrl);
        await first.arrayBuffer();
        const etag = first.headers.get('etag');
        const catalog = await fetch(catalogUrl).then((r) => r.json() as Promise<{ items?: unknown[] }>);
        if (!etag) throw new Error('the manifest answered without an ETag');
        if (catalog.items?.length !== CATALOG_ITEMS) notes.push(`the catalog listed ${catalog.items?.length} items, not ${CATALOG_ITEMS}`);
        const bare = opts.spawn
          ? await spawnTs(join(ROOT, 'server/bench/bare-express.ts'), {}, (port) => `http://127.0.0.1:${port}/bare`).then((s) => ({ url: `http://127.0.0.1:${s.port}/bare`, stop: s.stop }))
          : await startBareExpress().then((s) => ({ url: s.url, stop: () => closeServer(s.server) }));
        try {
          const targets: Array<{ key: string; url: string; expect: 200 | 304; headers: Record<string, string> }> = [
            { key: 'bare', url: bare.url, expect: 200, headers: {} },
            { key: 'manifest', url: manifestUrl, expect: 200, headers: {} },
            { key: 'm304', url: manifestUrl, expect: 304, headers: { 'if-none-match': etag } },
            { key: 'catalog', url: catalogUrl, expect: 200, headers: {} },
          ];
          for (const t of targets) {
            const warm = await cannon(t.url, 1, t.expect, t.headers);
            if (warm.bad) notes.push(`reads: ${t.key} warm-up had ${warm.bad} of ${warm.total} answers other than ${t.expect} (not counted)`);
          }
          const got: Record<string, Cannon | undefined> = {};
          for (let r = 0; r < plan.readRounds; r++) {
            // rotate who goes first, so each target meets every phase of the machine's load
            for (let i = 0; i < targets.length; i++) {
              const t = targets[(i + r) % targets.length]!;
              got[t.key] = addCannon(got[t.key], await cannon(t.url, plan.readSeconds, t.expect, t.headers));
            }
          }
          const base = got.bare!;
          const readRow = (what: string, c: Cannon, min: number): Row => ({
            what,
            figure: `${f0(c.reqPerSec)} req/s p50 ${c.p50} ms p99 ${c.p99} ms`,
            baseline: `${f0(base.reqPerSec)} req/s p50 ${base.p50} ms p99 ${base.p99} ms`,
            ratio: percent(c.reqPerSec, base.reqPerSec),
            target: `>= ${min * 100}%`,
            verdict: verdict(c.reqPerSec / base.reqPerSec >= min),
          });
          rows.push(readRow('GET manifest 200, 32 connections', got.manifest!, 0.6));
          rows.push(readRow('GET manifest 304 (If-None-Match), 32 conns', got.m304!, 0.6));
          rows.push(readRow(`GET agent catalog (${CATALOG_ITEMS} items), 32 conns`, got.catalog!, 0.5));
          for (const [k, c] of Object.entries(got)) if (c && c.bad) notes.push(`reads: ${k} had ${c.bad} of ${c.total} answers other than expected`);
        } finally {
          await bare.stop();
        }
      }
    } finally {
      await env.stop();
    }
  }

  if (opts.parts.has('pglite')) {
    // one process by nature: a process model set for the PostgreSQL parts does not apply
    const config = loadConfig({ ...benchConfigEnv(), SVC_WEB_CONCURRENCY: '1' });
    const services = await createServices(config, { target: { kind: 'pglite', dataDir: null }, log: createLogger(config.LOG_LEVEL) });
    const local = await listenLocal(services);
    const client = httpPoster(local.url, 16);
    try {
      const env = { services, localUrl: local.url };
      const shop = await publishShop(env);
      const buyers = Array.from({ length: 8 }, () => newBuyer());
      const db = (await services.orm.em.getConnection().getNativeClient()) as PgliteLike;
      const shaped = await shapedOnPglite(db, 8);
      const ceiling = await startCeiling(services, ceilingPglite(db as unknown as Parameters<typeof ceilingPglite>[0]));
      const ceilingClient = httpPoster(ceiling.url, 16);
      const warm = await settleBatch(client.post, await prepareSettles(client.post, shop, 16, buyers), 8);
      await settleBatch(ceilingClient.post, await prepareSettles(client.post, shop, 16, buyers), 8);
      if (warm.samples.some((s) => !s.ok)) failures.push(`PGlite warm-up settles: ${warm.samples.filter((s) => !s.ok).length} of ${warm.samples.length} failed`);
      await shapedFor(shaped, 8, 0.5);
      const jobs = await prepareSettles(client.post, shop, plan.pgliteSettles, buyers);
      const ceilingRun = { post: ceilingClient.post, jobs: await prepareSettles(client.post, shop, plan.pgliteSettles, buyers) };
      const c = await compareSettles(client.post, jobs, shaped, 8, plan.rounds, plan.baseSeconds, () => ({ total: process.memoryUsage().rss, largest: process.memoryUsage().rss, processes: 1 }), undefined, ceilingRun);
      ceilingClient.close();
      await ceiling.close();
      if (c.ceiling && c.ceiling.ok !== c.ceiling.n) failures.push(`PGlite ceiling handler: ${c.ceiling.n - c.ceiling.ok} of ${c.ceiling.n} failed (${failText(c.ceiling)})`);
      if (c.ours.ok !== c.ours.n) failures.push(`settle on PGlite: ${c.ours.n - c.ours.ok} of ${c.ours.n} failed (${failText(c.ours)})`);
      const doubles = await doubleOrders(services);
      if (doubles) failures.push(`${doubles} PGlite session(s) with two orders`);
      rows.push({
        what: `settle, embedded PGlite, 8 agents (n=${c.ours.n})`,
        figure: settleText(c.ours),
        baseline: settleText(c.base),
        ...(c.ceiling ? { ceiling: settleText(c.ceiling), ofCeiling: percent(c.ours.perSec, c.ceiling.perSec) } : {}),
        ratio: percent(c.ours.perSec, c.base.perSec),
        target: '>= 50% of ceiling',
        verdict: verdict(c.ceiling !== undefined && c.ours.perSec / c.ceiling.perSec >= 0.5),
      });
      rows.push({ what: 'process RSS, max under the PGlite settles', figure: `${f0(c.rss.largest / 2 ** 20)} MiB`, baseline: '', ratio: '', target: '', verdict: '' });
    } finally {
      client.close();
      await closeServer(local.server);
      await closeServices(services, { force: true });
    }
  }

  const header =
    `core (${cpus().length} CPUs, Node ${process.versions.node}, ${q ? 'quick' : 'full'} run${describe ? `, ${describe}` : ''}; ` +
    `test-mode settles over HTTP with pre-signed payments; baselines measured in the same run, interleaved round by round; ` +
    `ceiling = a minimal Express + node-pg handler (server/bench/ceiling.ts) sending the service's own settle statements, with the same signature check and receipt signing, on its own prepared sessions; ` +
    `raw txn = node-pg pool ${BASELINE_POOL} (PGlite: its one session) running BEGIN, SELECT FOR UPDATE, 3 INSERTs, UPDATE, COMMIT at the same concurrency; ` +
    `reads: autocannon, 32 connections, vs a bare Express 5 GET of a small JSON; ratio = figure / baseline):`;
  const footer = [
    ...notes.map((n) => `  ${n}`),
    ...(failures.length
      ? [`  correctness: FAIL: ${failures.join('; ')}`]
      : rows.some((r) => r.what.startsWith('settle'))
        ? ['  correctness: every settle under load accepted, no session with two orders']
        : []),
    `  core section took ${((performance.now() - started) / 1000).toFixed(1)} s`,
  ];
  return { text: [header, table(rows), ...footer].join('\n'), failures };
}

// what the hot-row section (hot-row.ts) shares with this one
export { figures, httpPoster, prepareSettles, publishShop, settleBatch, startPostgresEnv, type Figures, type Job, type Shop };
