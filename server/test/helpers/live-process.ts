import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createScratchDatabase } from '../../src/db/scratch.js';
import { startAnvil, type Anvil } from './anvil.js';
import { freePort } from './spawn.js';

const ROOT = join(import.meta.dirname, '..', '..', '..');
// node itself with the tsx loader (not the tsx CLI, which runs the server in a child that SIGKILL would orphan).
const NODE_ARGS = ['--import', 'tsx'];

export type LiveProcess = {
  /** The chain (anvil, a block every 2 s), started before the tests. */
  readonly chain: Anvil;
  /** The first live API key, minted by the admin CLI before any server holds the database. */
  liveKey(): string;
  /** Starts `server/src/main.ts` (npm start's entry point) and waits for /healthz. */
  start(): Promise<void>;
  /** SIGKILL: no shutdown hook runs. */
  kill9(): Promise<void>;
  call(method: string, path: string, opts?: { key?: string; body?: unknown }): Promise<{ status: number; body: any; text: string }>; // eslint-disable-line @typescript-eslint/no-explicit-any
};

/**
 * A real server process in live mode (the `onchain` facilitator, two funded relayers) on an
 * anvil that mines every 2 s, over its own scratch database (PostgreSQL when DATABASE_URL is set,
 * else an embedded data directory), for the kill -9 tests. Registers its beforeAll and afterAll.
 */
export function useLiveProcess(name: string): LiveProcess {
  let chain: Anvil | undefined;
  let env: Record<string, string> = {};
  let cleanup: () => Promise<void> = async () => undefined;
  let server: ChildProcess | null = null;
  let baseUrl = '';

  const kill9 = async (): Promise<void> => {
    const proc = server;
    if (!proc) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill('SIGKILL');
    });
    server = null;
  };

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
      const scratch = await createScratchDatabase(process.env.DATABASE_URL, `svc_${name}`, 10);
      env.DATABASE_URL = (scratch.target as { url: string }).url;
      cleanup = scratch.drop;
    } else {
      const dir = mkdtempSync(join(tmpdir(), `svc-${name}-`));
      env.SVC_DATA_DIR = dir;
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
  afterAll(async () => {
    await kill9();
    await cleanup();
    await chain?.stop();
  });

  return {
    get chain() {
      if (!chain) throw new Error('the chain starts in beforeAll');
      return chain;
    },
    liveKey() {
      const cli = spawnSync(process.execPath, [...NODE_ARGS, 'server/src/cli.ts', 'keys', 'create', '--mode', 'live', '--json'], { cwd: ROOT, env, encoding: 'utf8' });
      expect(cli.status, cli.stderr).toBe(0);
      return JSON.parse(cli.stdout).secret as string;
    },
    async start() {
      const port = await freePort();
      baseUrl = `http://127.0.0.1:${port}`;
      const proc = spawn(process.execPath, [...NODE_ARGS, 'server/src/main.ts'], { cwd: ROOT, env: { ...env, PORT: String(port), HOST: '127.0.0.1' }, stdio: ['ignore', 'ignore', 'pipe'] });
      server = proc;
      let stderr = '';
      proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        if (proc.exitCode !== null) throw new Error(`server exited: ${stderr.slice(-2000)}`);
        try {
          if ((await fetch(`${baseUrl}/healthz`)).ok) return;
        } catch {
          /* not listening yet */
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`server did not start: ${stderr.slice(-2000)}`);
    },
    kill9,
    async call(method, path, opts = {}) {
      const res = await fetch(baseUrl + path, {
        method,
        headers: { ...(opts.key ? { authorization: `Bearer ${opts.key}` } : {}), ...(opts.body ? { 'content-type': 'application/json' } : {}) },
        body: opts.body ? JSON.stringify(opts.body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, text };
    },
  };
}
