import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createScratchDatabase } from '../src/db/scratch.js';
import { EIP3009_TOKEN_ABI } from './chain/eip3009-token.artifact.js';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { signPayment } from './helpers/agent.js';
import { freePort } from './helpers/spawn.js';

/**
 * kill -9 of a real server process (`tsx server/src/main.ts`, the same entry point as
 * `npm start`, run by node itself) while live settles are in flight on a chain that mines every second; after a
 * restart the reconciler must leave every transfer that moved with exactly one order, one
 * receipt and one order.settled, and every one that did not move released.
 */
const ROOT = join(import.meta.dirname, '..', '..');
// node itself with the tsx loader (not the tsx CLI, which runs the server in a child that SIGKILL would orphan).
const NODE_ARGS = ['--import', 'tsx'];

let chain: Anvil;
let env: Record<string, string>;
let cleanup: () => Promise<void> = async () => undefined;
let server: ChildProcess | null = null;
let baseUrl = '';


async function startServer(): Promise<void> {
  const port = await freePort();
  baseUrl = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, [...NODE_ARGS, 'server/src/main.ts'], { cwd: ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  server.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (server.exitCode !== null) throw new Error(`server exited: ${stderr.slice(-2000)}`);
    try {
      if ((await fetch(`${baseUrl}/healthz`)).ok) return;
    } catch {
      /* not listening yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`server did not start: ${stderr.slice(-2000)}`);
}

async function kill9(): Promise<void> {
  const proc = server!;
  await new Promise<void>((resolve) => {
    proc.once('exit', () => resolve());
    proc.kill('SIGKILL');
  });
  server = null;
}

async function call(method: string, path: string, opts: { key?: string; body?: unknown } = {}) {
  const res = await fetch(baseUrl + path, {
    method,
    headers: { ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}), ...(opts.body ? { 'content-type': 'application/json' } : {}) },
    body: opts.body ? JSON.stringify(opts.body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
}

beforeAll(async () => {
  chain = await startAnvil({ blockTime: 2 });
  const relayers = [generatePrivateKey(), generatePrivateKey()];
  for (const k of relayers) await chain.setEthBalance(privateKeyToAccount(k).address, 10n ** 19n);
  env = {
    PATH: process.env.PATH ?? '',
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_LIVE_FACILITATOR: 'onchain',
    SVC_RPC_URL_BASE: chain.rpcUrl,
    SVC_RELAYER_PRIVATE_KEYS: relayers.join(','),
    SVC_SETTLE_WAIT_MS: '20000',
    SVC_RECONCILE_INTERVAL_MS: '300',
  };
  if (process.env.DATABASE_URL) {
    const scratch = await createScratchDatabase(process.env.DATABASE_URL, 'svc_crash', 10);
    env.DATABASE_URL = (scratch.target as { url: string }).url;
    cleanup = scratch.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'svc-crash-'));
    env.SVC_DATA_DIR = dir;
    cleanup = async () => rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
afterAll(async () => {
  if (server) await kill9();
  await cleanup();
  await chain?.stop();
});

describe('kill -9 during live settlement', () => {
  it('GIVEN live settles in flight WHEN the server is killed with SIGKILL and restarted THEN within 60 s every moved transfer has exactly one order, receipt and order.settled and every unmoved one is released', async () => {
    // The first live key, minted by the admin CLI before the server holds the database.
    const cli = spawnSync(process.execPath, [...NODE_ARGS, 'server/src/cli.ts', 'keys', 'create', '--mode', 'live', '--json'], { cwd: ROOT, env, encoding: 'utf8' });
    expect(cli.status, cli.stderr).toBe(0);
    const key = JSON.parse(cli.stdout).secret as string;

    await startServer();
    const payTo = privateKeyToAccount(generatePrivateKey()).address;
    const m = await call('POST', '/v1/merchants', { key, body: { slug: `crash-${randomUUID().slice(0, 8)}`, name: 'Crash', domain: 'crash.example.com', receiving: { x402: { chain: 'base', address: payTo } } } });
    expect(m.status, m.text).toBe(201);
    const q = `?merchant_id=${m.body.id}`;
    expect((await call('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '1.25', currency: 'USD' } } })).status).toBe(201);
    expect((await call('PUT', `/v1/policy${q}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } })).status).toBe(201);
    expect((await call('POST', `/v1/publish${q}`, { key })).status).toBe(200);
    const base = `/m/${m.body.id}`;

    const N = 10;
    const buyers = Array.from({ length: N }, () => privateKeyToAccount(generatePrivateKey()));
    for (const b of buyers) await chain.mintUsdc(b.address, 10_000_000n);
    const sessions: Array<{ id: string; from: Address; nonce: `0x${string}` }> = [];
    const payments: unknown[] = [];
    for (const b of buyers) {
      const s = await call('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'tea', qty: 1 }] } });
      expect(s.status, s.text).toBe(201);
      const p = await signPayment(b, s.body.payment_required);
      sessions.push({ id: s.body.session_id, from: b.address, nonce: p.payment.authorization.nonce });
      payments.push(p);
    }
    // Fire every settle, then kill the server while they wait for blocks (2 s block time).
    const inFlight = sessions.map((s, i) => call('POST', `${base}/agent/checkout/${s.id}/settle`, { body: payments[i] }).catch(() => null));
    // Kill as soon as transfers sit in the node's mempool (sent, not yet mined: blocks come every 2 s).
    const seen = Date.now() + 30_000;
    for (;;) {
      const pool = await chain.rpc<{ pending: string }>('txpool_status');
      if (Number(pool.pending) >= 1 || Date.now() > seen) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await kill9();
    await Promise.all(inFlight);

    const t0 = Date.now();
    await startServer();
    process.stderr.write(`restart took ${Date.now() - t0} ms\n`);
    const deadline = Date.now() + 60_000;
    const states = new Map<string, string>();
    for (;;) {
      for (const s of sessions) states.set(s.id, (await call('GET', `${base}/agent/checkout/${s.id}`)).body.state);
      if (![...states.values()].includes('settling') || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    process.stderr.write(`resolved ${Date.now() - t0} ms after the restart began: ${JSON.stringify([...states.values()])}\n`);
    expect([...states.values()].filter((st) => st === 'settling')).toEqual([]);

    const orders = (await call('GET', `/v1/orders${q}&limit=100`, { key })).body.data as Array<{ session_id: string; decision: string; settlement_ref?: string; receipt_id?: string }>;
    const events = (await call('GET', '/v1/events?limit=100', { key })).body.data as Array<{ type: string; data: { object: { session_id: string } } }>;
    let moved = 0;
    for (const s of sessions) {
      const used = await chain.client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'authorizationState', args: [s.from, s.nonce] });
      const mine = orders.filter((o) => o.session_id === s.id);
      const settled = events.filter((e) => e.type === 'order.settled' && e.data.object.session_id === s.id);
      if (used) {
        moved += 1;
        expect(states.get(s.id)).toBe('accepted');
        expect(mine).toHaveLength(1);
        expect(mine[0]).toMatchObject({ decision: 'accept' });
        expect(mine[0]!.receipt_id).toMatch(/^rcpt_/);
        expect((await chain.client.getTransactionReceipt({ hash: mine[0]!.settlement_ref as `0x${string}` })).status).toBe('success');
        expect(settled).toHaveLength(1);
      } else {
        expect(states.get(s.id)).toBe('awaiting_payment');
        expect(mine).toHaveLength(0);
        expect(settled).toHaveLength(0);
      }
    }
    expect(await chain.usdcBalance(payTo)).toBe(BigInt(moved) * 1_250_000n);
    expect(moved).toBeGreaterThan(0);
  }, 240_000);
});
