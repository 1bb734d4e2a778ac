import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, freePort, MAIN, ROOT, runScript, TSX } from './helpers/spawn.js';

// The newcomer's situation: `npm start` runs on the embedded database, and the admin CLI is
// used from a second terminal without stopping it (the operator channel).
const dataDir = mkdtempSync(join(tmpdir(), 'svc-operator-'));
const env = (extra: Record<string, string> = {}): Record<string, string | undefined> => ({
  DATABASE_URL: undefined,
  SVC_DATA_DIR: dataDir,
  SVC_MASTER_KEY: masterKey,
  NODE_ENV: 'test',
  LOG_LEVEL: 'warn',
  ...extra,
});
const masterKey = randomBytes(32).toString('hex');
let server: ChildProcess;
let base: string;

const cli = (...args: string[]) => runScript(CLI, args, env());


beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  const serverEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries({ ...process.env, ...env({ PORT: String(port), HOST: '127.0.0.1' }) })) if (v !== undefined) serverEnv[k] = v;
  server = spawn(process.execPath, [TSX, MAIN], { cwd: ROOT, env: serverEnv, stdio: 'ignore' });
  const deadline = Date.now() + 90_000;
  for (;;) {
    if (Date.now() > deadline) throw new Error('server did not start');
    const ok = await fetch(`${base}/healthz`).then((r) => r.ok, () => false);
    if (ok && existsSync(join(dataDir, 'operator.json'))) break;
    await new Promise((r) => setTimeout(r, 250));
  }
}, 120_000);

afterAll(async () => {
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
  rmSync(dataDir, { recursive: true, force: true });
});

describe('the admin CLI while the server runs on the embedded database', () => {
  it('GIVEN `npm start` holding the embedded database WHEN the CLI mints a key THEN the running server does it and the key works at once', async () => {
    const file = join(dataDir, 'operator.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const created = await cli('keys', 'create', '--mode', 'test', '--json');
    expect(created.code, created.stderr).toBe(0);
    const key = JSON.parse(created.stdout);
    expect(key.secret).toMatch(/^svc_test_/);
    const me = await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${key.secret}` } });
    expect(me.status).toBe(200);

    const project = await cli('projects', 'create', '--name', 'Second shop', '--json');
    expect(project.code, project.stderr).toBe(0);
    expect(JSON.parse(project.stdout).name).toBe('Second shop');

    const revoked = await cli('keys', 'revoke', key.id);
    expect(revoked.stdout.trim()).toBe(`revoked ${key.id}`);
    expect((await fetch(`${base}/v1/me`, { headers: { authorization: `Bearer ${key.secret}` } })).status).toBe(401);

    // A usage error comes back as the CLI's own message and exit status.
    const bad = await cli('keys', 'create', '--mode', 'prod');
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('keys create needs --mode test|live');
  }, 180_000);

  it('GIVEN the operator endpoint WHEN called without the token or with a wrong one THEN 401 and nothing runs', async () => {
    const { token } = JSON.parse(readFileSync(join(dataDir, 'operator.json'), 'utf8')) as { token: string };
    const call = (auth?: string) =>
      fetch(`${base}/v1/operator/cli`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
        body: JSON.stringify({ argv: ['projects', 'create', '--name', 'x'] }),
      });
    expect((await call()).status).toBe(401);
    expect((await call(`Bearer svc_op_${'A'.repeat(43)}`)).status).toBe(401);
    expect((await call(`Bearer ${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`)).status).toBe(401);
    const ok = await call(`Bearer ${token}`);
    expect(ok.status).toBe(200);
  });
});
