import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildPackages, ROOT } from './helpers/build.js';
import { freePort } from './helpers/spawn.js';

/**
 * The server as an operator runs it: `npm run build`, then plain `node server/dist/main.js`
 * (no tsx) with NODE_ENV=production on the embedded database, a metrics token and JSON logs.
 */

const TOKEN = 'prod-metrics-token-0123456789';
const dataDir = mkdtempSync(join(tmpdir(), 'svc-prod-'));
let child: ChildProcess;
let base = '';
let logs = '';


const logLines = () =>
  logs
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);

beforeAll(async () => {
  await buildPackages(['server']);
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('VITEST') && k !== 'DATABASE_URL') env[k] = v;
  Object.assign(env, {
    NODE_ENV: 'production',
    PORT: String(port),
    HOST: '127.0.0.1',
    SVC_DATA_DIR: dataDir,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_METRICS_TOKEN: TOKEN,
    SVC_PUBLIC_BASE_URL: base,
    LOG_LEVEL: 'info',
    NODE_OPTIONS: '',
  });
  // Plain node: no loader, no tsx in the command line.
  child = spawn(process.execPath, [join(ROOT, 'server/dist/main.js')], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout!.on('data', (b) => (logs += b));
  child.stderr!.on('data', (b) => (logs += b));
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited ${child.exitCode}\n${logs}`);
    const up = await fetch(`${base}/healthz`).then((r) => r.ok, () => false);
    if (up) break;
    if (Date.now() > deadline) throw new Error(`server did not start\n${logs}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}, 240_000);

afterAll(async () => {
  if (child && child.exitCode === null) {
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGTERM');
    await exited;
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('compiled server under plain node, NODE_ENV=production', () => {
  it('GIVEN the embedded database in production THEN a clear warning is logged at start', () => {
    const warning = logLines().find((l) => l.level === 40 && String(l.msg).includes('NODE_ENV=production on the embedded PGlite database'));
    expect(warning, logs).toBeDefined();
    expect(String(warning!.msg)).toContain('DATABASE_URL');
  });

  it('GIVEN an X-Request-Id WHEN it is 1-128 safe characters THEN it is echoed as Request-Id and logged; otherwise a req_ id is generated', async () => {
    const mine = 'edge-7f3a:trace.42_x';
    const echoed = await fetch(`${base}/healthz`, { headers: { 'x-request-id': mine } });
    expect(echoed.headers.get('request-id')).toBe(mine);
    const none = await fetch(`${base}/healthz`);
    expect(none.headers.get('request-id')).toMatch(/^req_[0-9a-z]{26}$/);
    for (const bad of ['a'.repeat(129), 'has space', 'quote"d', '<script>', 'semi;colon']) {
      const res = await fetch(`${base}/healthz`, { headers: { 'x-request-id': bad } });
      expect(res.headers.get('request-id'), bad).toMatch(/^req_[0-9a-z]{26}$/);
    }
    const accepted = 'x'.repeat(128);
    expect((await fetch(`${base}/healthz`, { headers: { 'x-request-id': accepted } })).headers.get('request-id')).toBe(accepted);
    // The error body path carries it too (the SDK reads Request-Id into SvcApiError.requestId).
    const unauth = await fetch(`${base}/v1/me`, { headers: { 'x-request-id': mine } });
    expect(unauth.status).toBe(401);
    expect(unauth.headers.get('request-id')).toBe(mine);
    // the server writes a request's line as its response finishes; wait for both (a busy machine may take a while)
    let logged = logLines().filter((l) => l.msg === 'request' && l.request_id === mine);
    for (const end = Date.now() + 60_000; logged.length < 2 && Date.now() < end; ) {
      await new Promise((r) => setTimeout(r, 100));
      logged = logLines().filter((l) => l.msg === 'request' && l.request_id === mine);
    }
    expect(logged.map((l) => l.path).sort()).toEqual(['/healthz', '/v1/me']);
    expect(logs).not.toContain('<script>');
  });

  it('GIVEN SVC_METRICS_TOKEN THEN /metrics answers Prometheus text to the token only', async () => {
    expect((await fetch(`${base}/metrics`)).status).toBe(401);
    const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^svc_http_requests_total\{method="GET",route="\/healthz",status="200",service="svc-checkout"\} \d+$/m);
    expect(text).toContain('svc_db_pool_connections{state="total",service="svc-checkout"} 1');
  });

  it('GIVEN the compiled server THEN the OpenAPI document and the docs page are served from the repository files', async () => {
    const spec = await fetch(`${base}/openapi.json`);
    expect(spec.status).toBe(200);
    expect(((await spec.json()) as { openapi: string }).openapi).toMatch(/^3\./);
    expect((await fetch(`${base}/docs/assets/redoc.standalone.js`)).status).toBe(200);
  });

  it('GIVEN the compiled server under plain node THEN signers are recovered by the native libsecp256k1 binding, and the compiled worker of the fallback answers what viem answers', () => {
    // The worker file is resolved beside the compiled module (server/dist/lib/signer-recovery.worker.mjs, emitted there by the build), with no loader.
    const script = `
      import { SignerRecovery } from ${JSON.stringify(join(ROOT, 'server/dist/lib/signer-recovery.js'))};
      import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
      import { keccak256, toHex } from 'viem';
      const account = privateKeyToAccount(generatePrivateKey());
      const digest = keccak256(toHex('compiled worker'));
      const signature = await account.sign({ hash: digest });
      const log = { warn: (o, m) => console.error(m, JSON.stringify(o)) };
      const native = new SignerRecovery(1, log);
      const nativeSigner = await native.recover(digest, signature);
      const pool = new SignerRecovery(1, log, { native: false });
      await pool.whenReady();
      const signer = await pool.recover(digest, signature);
      console.log(JSON.stringify({ signer, nativeSigner, mode: native.mode, nativeThreads: native.runningThreads, expected: account.address, inThreads: pool.recoveredInThreads, threads: pool.runningThreads }));
      await native.close();
      await pool.close();
    `;
    const run = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      cwd: join(ROOT, 'server'),
      env: { PATH: process.env.PATH ?? '', NODE_OPTIONS: '' },
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(run.status, run.stderr).toBe(0);
    expect(run.stderr).toBe('');
    const out = JSON.parse(run.stdout.trim()) as { signer: string; nativeSigner: string; mode: string; nativeThreads: number; expected: string; inThreads: number; threads: number };
    expect(out.mode).toBe('native');
    expect(out.nativeSigner).toBe(out.expected);
    expect(out.nativeThreads).toBe(0);
    expect(out.signer).toBe(out.expected);
    // The warm-up and this recovery both ran in the thread.
    expect(out.inThreads).toBe(2);
    expect(out.threads).toBe(1);
  });
});
