/**
 * Settle load, test mode, real PostgreSQL: the same server run with signer recovery on the
 * request thread (SVC_SIGNER_THREADS=0, "before") and in the worker-thread pool (default,
 * "after"), interleaved in one run. Reports settles/s, p50/p99 latency and the server's CPU per
 * settle, split into the main (request) thread and the rest of the process.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { availableParallelism } from 'node:os';
const R = '/work/wt-cores';
const { createScratchDatabase } = await import(`${R}/server/src/db/scratch.ts`);
const { createServices, closeServices } = await import(`${R}/server/src/boot.ts`);
const { loadConfig } = await import(`${R}/server/src/config.ts`);
const { createApiKey, createProject } = await import(`${R}/server/src/modules/accounts/service.ts`);
const { generatePrivateKey, privateKeyToAccount } = await import('viem/accounts');
const { TRANSFER_WITH_AUTHORIZATION_TYPES } = await import('@svc/contract');

const ADMIN = process.env.DATABASE_URL ?? 'postgresql://postgres@127.0.0.1:5432/test';
const MASTER = randomBytes(32).toString('hex');
const CLK_TCK = 100;

const freePort = () =>
  new Promise<number>((done) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => done(p));
    });
  });

function threadTicks(pid: number): { main: number; other: number } {
  let main = 0;
  let other = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const t = Number(f[11]) + Number(f[12]);
    if (Number(tid) === pid) main += t;
    else other += t;
  }
  return { main, other };
}

async function startServer(url: string, env: Record<string, string>) {
  const port = await freePort();
  const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', `${R}/server/src/main.ts`], {
    cwd: R,
    env: { ...process.env, NODE_ENV: 'test', LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: url, SVC_MASTER_KEY: MASTER, SVC_DB_POOL_MAX: '16', SVC_RUN_WORKER: 'false', SVC_CHECKOUT_RATE_PER_MINUTE: '100000', ...env },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const base = `http://127.0.0.1:${port}`;
  for (;;) {
    if (await fetch(`${base}/healthz`).then((r) => r.ok, () => false)) break;
    await new Promise((r) => setTimeout(r, 200));
  }
  return { child, base };
}

async function main() {
  const scratch = await createScratchDatabase(ADMIN, 'svc_cores_bench', 20);
  const url = scratch.target.url;
  const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', DATABASE_URL: url, SVC_MASTER_KEY: MASTER });
  const services = await createServices(config);
  const em = services.orm.em.fork();
  const project = await createProject(em, 'bench', { now: new Date() });
  const { secret } = await createApiKey(em, { projectId: project.id, mode: 'test', now: new Date() });
  await closeServices(services);

  const servers = {
    before: await startServer(url, { SVC_SIGNER_THREADS: '0' }),
    after: await startServer(url, {}),
  };
  const api = async (base: string, method: string, path: string, body?: unknown, auth = true) => {
    const res = await fetch(base + path, {
      method,
      headers: { ...(auth ? { authorization: `Bearer ${secret}` } : {}), ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  };
  const b0 = servers.before.base;
  const slug = `bench-${randomUUID().slice(0, 8)}`;
  const m = await api(b0, 'POST', '/v1/merchants', { slug, name: 'Bench', domain: `${slug}.example.com`, receiving: { x402: { chain: 'base-sepolia', address: '0x1111111111111111111111111111111111111111' } } });
  if (m.status !== 201) throw new Error(JSON.stringify(m.body));
  const q = `?merchant_id=${m.body.id}`;
  await api(b0, 'POST', `/v1/catalog${q}`, { sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' }, available: true, category: 'shop' });
  await api(b0, 'PUT', `/v1/policy${q}`, { body: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } });
  const pub = await api(b0, 'POST', `/v1/publish${q}`);
  if (pub.status !== 200) throw new Error(JSON.stringify(pub.body));
  const shopBase = `/m/${m.body.id}`;

  // Sessions and payments prepared before any timing (agents with pre-signed payments).
  const prepare = async (base: string, n: number) => {
    const out: Array<{ id: string; payment: unknown }> = [];
    const accounts = Array.from({ length: 16 }, () => privateKeyToAccount(generatePrivateKey()));
    for (let i = 0; i < n; i += 16) {
      const batch = await Promise.all(
        Array.from({ length: Math.min(16, n - i) }, async (_, j) => {
          const s = await api(base, 'POST', `${shopBase}/agent/checkout`, { agent_id: randomUUID(), items: [{ sku: 'coffee', qty: 1 }] }, false);
          if (s.status !== 201) throw new Error(JSON.stringify(s.body));
          const pr = s.body.payment_required;
          const now = Math.floor(Date.now() / 1000);
          const account = accounts[j]!;
          const authorization = { from: account.address, to: pr.payTo, value: pr.amountBaseUnits, validAfter: now - 600, validBefore: now + 3600, nonce: `0x${randomBytes(32).toString('hex')}` as `0x${string}` };
          const signature = await account.signTypedData({
            domain: { name: pr.eip712Domain.name, version: pr.eip712Domain.version, chainId: pr.chainId, verifyingContract: pr.verifyingContract },
            types: TRANSFER_WITH_AUTHORIZATION_TYPES,
            primaryType: 'TransferWithAuthorization',
            message: { ...authorization, to: authorization.to, value: BigInt(authorization.value), validAfter: BigInt(authorization.validAfter), validBefore: BigInt(authorization.validBefore) },
          });
          return { id: s.body.session_id as string, payment: { payment: { scheme: 'x402-exact', authorization, signature } } };
        }),
      );
      out.push(...batch);
    }
    return out;
  };

  const run = async (label: 'before' | 'after', agents: number, n: number) => {
    const { base, child } = servers[label];
    const work = await prepare(base, n);
    await new Promise((r) => setTimeout(r, 300));
    const t0 = threadTicks(child.pid!);
    const lat: number[] = [];
    let failed = 0;
    let next = 0;
    const start = performance.now();
    await Promise.all(
      Array.from({ length: agents }, async () => {
        for (;;) {
          const i = next++;
          if (i >= work.length) return;
          const w = work[i]!;
          const t = performance.now();
          const r = await api(base, 'POST', `${shopBase}/agent/checkout/${w.id}/settle`, w.payment, false);
          lat.push(performance.now() - t);
          if (r.status !== 200 || r.body.status !== 'accepted') failed++;
        }
      }),
    );
    const secs = (performance.now() - start) / 1000;
    const t1 = threadTicks(child.pid!);
    lat.sort((x, y) => x - y);
    const pct = (p: number) => lat[Math.min(lat.length - 1, Math.floor(p * lat.length))]!.toFixed(1);
    const mainMs = ((t1.main - t0.main) * 1000) / CLK_TCK / n;
    const otherMs = ((t1.other - t0.other) * 1000) / CLK_TCK / n;
    console.log(
      `${label.padEnd(6)} agents=${String(agents).padStart(2)} n=${n} settles/s=${(n / secs).toFixed(1).padStart(6)} p50=${pct(0.5).padStart(6)} ms p99=${pct(0.99).padStart(6)} ms  server CPU/settle: main thread ${mainMs.toFixed(2)} ms + other threads ${otherMs.toFixed(2)} ms = ${(mainMs + otherMs).toFixed(2)} ms  failed=${failed}`,
    );
  };

  console.log(`cores=${availableParallelism()} node=${process.version}`);
  // warm both (JIT, pools, signer threads)
  await run('before', 8, 64);
  await run('after', 8, 64);
  for (let rep = 0; rep < 2; rep++) {
    for (const agents of [8, 32]) {
      await run('before', agents, 400);
      await run('after', agents, 400);
    }
  }
  for (const s of Object.values(servers)) s.child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 2000));
  await scratch.drop();
}

await main();
