import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, ROOT, TSX } from './helpers/spawn.js';
import { TestApp } from './helpers/harness.js';

// `npm run svc -- login` as a newcomer runs it: the real CLI entry point under tsx, against a
// running server (embedded PGlite unless DATABASE_URL is set), with nothing stored.

type Child = { stdout: string; stderr: string; waitFor: (re: RegExp) => Promise<RegExpExecArray>; done: Promise<number | null>; kill: () => void };

/** `env` adds to (or, with undefined, removes from) this process's environment. */
function login(args: string[], env: Record<string, string | undefined> = {}): Child {
  const childEnv = Object.fromEntries(Object.entries({ ...process.env, ...env }).filter(([, v]) => v !== undefined)) as NodeJS.ProcessEnv;
  const child = spawn(process.execPath, [TSX, CLI, 'login', ...args], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], timeout: 90_000 });
  const state: Child = {
    kill: () => child.kill('SIGTERM'),
    stdout: '',
    stderr: '',
    waitFor: (re) =>
      new Promise((ok, fail) => {
        const check = () => {
          const m = re.exec(state.stderr);
          if (m) {
            child.stderr.off('data', check);
            ok(m);
          }
        };
        child.stderr.on('data', check);
        child.on('close', () => fail(new Error(`exited before ${re}: ${state.stderr}`)));
        check();
      }),
    done: new Promise((ok) => child.on('close', (code) => ok(code))),
  };
  child.stdout.on('data', (b) => (state.stdout += b));
  child.stderr.on('data', (b) => (state.stderr += b));
  return state;
}

/** What a person does with the mailed link: opens it (a page), then presses its button (a same-origin form POST). */
async function followSignInLink(link: string): Promise<Response> {
  const page = await fetch(link);
  expect(page.status).toBe(200);
  const token = /name="token" value="([^"]+)"/.exec(await page.text())![1]!;
  return fetch(new URL('/v1/auth/verify', link), {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(link).origin },
    body: new URLSearchParams({ token }),
  });
}

let app: TestApp;
const dir = mkdtempSync(join(tmpdir(), 'svc-login-'));
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => {
  await app?.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** What the device page sends when the signed-in person types the code their terminal shows. */
const typeCode = (cookie: string, code: string) =>
  app.request('POST', '/v1/auth/cli/approve', { headers: { cookie: `svc_session=${cookie}`, origin: app.baseUrl }, body: { user_code: code } });
const cookieOf = (res: Response) => /svc_session=([^;]+)/.exec(res.headers.get('set-cookie')!)![1]!;

describe('svc login', () => {
  it('GIVEN a running server WHEN `svc login --email` runs, the person follows the link and types the code on the device page THEN the CLI writes a working test key to --out (0600)', async () => {
    const out = join(dir, 'key.txt');
    const cli = login(['--url', app.baseUrl, '--email', `newcomer-${Date.now()}@example.com`, '--out', out]);
    const [, code] = await cli.waitFor(/Your code: ([A-Z]{4}-[A-Z]{4})/);
    const [, url] = await cli.waitFor(/Open (\S+) signed in and type this code/);
    expect(url).toBe(`${app.baseUrl}/dashboard/device`);
    const [, link] = await cli.waitFor(/Development server: the link is (\S+)/);
    // The person follows the link in their mail: it signs them in and lands on the device page, approving nothing.
    const signedIn = await followSignInLink(link!);
    expect(signedIn.status).toBe(303);
    expect(signedIn.headers.get('location')).toBe('/dashboard/device');
    expect((await app.request('POST', '/v1/auth/cli/approve', { body: { user_code: code } })).status).toBe(401);
    // There they type the code their terminal shows.
    expect((await typeCode(cookieOf(signedIn), code!)).status).toBe(200);
    expect(await cli.done).toBe(0);
    expect(cli.stdout).toMatch(/^wrote test key key_[0-9a-z]{26} to /);
    const secret = readFileSync(out, 'utf8').trim();
    expect(secret).toMatch(/^svc_test_/);
    expect(statSync(out).mode & 0o777).toBe(0o600);
    const me = await app.request('GET', '/v1/me', { key: secret });
    expect(me.status).toBe(200);
    expect(me.body.key.name).toBe('CLI login');
  }, 120_000);

  it('GIVEN `svc login` without --email WHEN a signed-in member types the printed code THEN the key is printed on stdout', async () => {
    const started = await app.request('POST', '/v1/auth/email/start', { body: { email: `member-${Date.now()}@example.com` } });
    const cookie = cookieOf(await followSignInLink(started.body.verify_url));

    const cli = login(['--url', app.baseUrl]);
    const [, code] = await cli.waitFor(/Your code: ([A-Z]{4}-[A-Z]{4})/);
    const [, url] = await cli.waitFor(/Open (\S+) signed in and type this code/);
    expect(url).toBe(`${app.baseUrl}/dashboard/device`);
    const approved = await typeCode(cookie, code!);
    expect(approved.status, approved.text).toBe(200);
    expect(await cli.done).toBe(0);
    const secret = cli.stdout.trim();
    expect(secret).toMatch(/^svc_test_[A-Za-z0-9_-]{43}$/);
    expect((await app.request('GET', '/v1/me', { key: secret })).status).toBe(200);
  }, 120_000);

  it("GIVEN no --url WHEN `svc login` runs THEN it talks to the server the environment configures: SVC_PUBLIC_BASE_URL, else http://localhost:$PORT", async () => {
    const port = new URL(app.baseUrl).port;
    const viaPort = login([], { PORT: port, SVC_PUBLIC_BASE_URL: undefined, NODE_ENV: 'development' });
    await viaPort.waitFor(/Your code: [A-Z]{4}-[A-Z]{4}/); // the server on $PORT answered
    viaPort.kill();
    await viaPort.done;
    // SVC_PUBLIC_BASE_URL wins over PORT (nothing listens on port 9).
    const viaBase = login([], { PORT: port, SVC_PUBLIC_BASE_URL: 'http://127.0.0.1:9', NODE_ENV: 'development' });
    expect(await viaBase.done).toBe(2);
    expect(viaBase.stderr).toContain('cannot reach http://127.0.0.1:9');
    // A bad setting is named, with the way around it.
    const bad = login([], { PORT: 'abc', SVC_PUBLIC_BASE_URL: undefined, NODE_ENV: 'development' });
    expect(await bad.done).toBe(2);
    expect(bad.stderr).toMatch(/invalid configuration: PORT .*--url sets the server's URL/);
  }, 180_000);

  it('GIVEN no server at the URL WHEN `svc login` runs THEN it exits 2 naming the URL', async () => {
    const cli = login(['--url', 'http://127.0.0.1:9']);
    expect(await cli.done).toBe(2);
    expect(cli.stderr).toContain('cannot reach http://127.0.0.1:9');
  }, 180_000);
});
