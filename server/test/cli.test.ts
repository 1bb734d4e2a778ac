import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { ulid } from 'ulid';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '@svc/contract';
import { buildApp } from '../src/app.js';
import { createServices } from '../src/boot.js';
import { loadConfig } from '../src/config.js';
import type { Services } from '../src/services.js';
import { expectError, onPostgres } from './helpers/foundation.js';
import { merchantBody, type ApiResponse } from './helpers/harness.js';
import { CLI, MAIN, runScript, type Run } from './helpers/spawn.js';

const run = (script: string, args: string[], env: Record<string, string | undefined>) => runScript(script, args, env);

/** Each test spawns tsx processes, which are slow on a loaded machine. */
const SPAWN_TIMEOUT = 300_000;

const lines = (s: string) => s.split('\n').filter((l) => l.length > 0);

// One database for the CLI and then the server: a data directory for PGlite (one process
// at a time), or a fresh PostgreSQL database.
const dataDir = mkdtempSync(join(tmpdir(), 'svc-cli-'));
const masterKey = randomBytes(32).toString('hex');
let databaseUrl: string | undefined;
let dropDatabase = async () => undefined as void;

const cliEnv = () => ({ SVC_DATA_DIR: dataDir, SVC_MASTER_KEY: masterKey, DATABASE_URL: databaseUrl, LOG_LEVEL: undefined, NODE_ENV: 'test' });
const cli = (...args: string[]) => run(CLI, args, cliEnv());

beforeAll(async () => {
  if (!onPostgres) return;
  const adminUrl = process.env.DATABASE_URL!;
  const name = `svc_cli_${ulid().toLowerCase()}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  databaseUrl = url.toString();
  dropDatabase = async () => {
    const c = new pg.Client({ connectionString: adminUrl });
    await c.connect();
    await c.query(`drop database if exists ${name} with (force)`);
    await c.end();
  };
});

afterAll(async () => {
  await dropDatabase();
  rmSync(dataDir, { recursive: true, force: true });
});

/** JSON on stdout: exactly one line, nothing on stderr, exit 0. */
function oneJsonLine(r: Run) {
  expect(r.code, r.stderr).toBe(0);
  expect(r.stderr).toBe('');
  expect(r.stdout.endsWith('\n')).toBe(true);
  expect(lines(r.stdout)).toHaveLength(1);
  return JSON.parse(r.stdout);
}

/** A refusal: non-zero exit, nothing on stdout, exactly one line on stderr. */
function oneLineFailure(r: Run) {
  const seen = JSON.stringify(r);
  expect(r.code, seen).not.toBe(0);
  expect(r.code, seen).not.toBeNull();
  expect(r.stdout, seen).toBe('');
  expect(lines(r.stderr), seen).toHaveLength(1);
  return r.stderr.trim();
}

describe('admin CLI, then the server on the same database', () => {
  const minted: Record<string, { id: string; secret: string; project_id: string; scopes: string[] }> = {};
  let project: { id: string; name: string; organization_id: string };

  it('GIVEN a fresh database WHEN `projects create --name Acme --json` THEN one JSON line describing the project', async () => {
    project = oneJsonLine(await cli('projects', 'create', '--name', 'Acme', '--json'));
    expect(project).toEqual({ id: expect.stringMatching(/^proj_[0-9a-z]{26}$/), name: 'Acme', organization_id: expect.stringMatching(/^org_[0-9a-z]{26}$/) });
  }, SPAWN_TIMEOUT);

  it('GIVEN no project flag WHEN `keys create --mode test --json` THEN one JSON line with a svc_test_ secret carrying every scope', async () => {
    const k = oneJsonLine(await cli('keys', 'create', '--mode', 'test', '--json'));
    expect(k).toEqual({
      id: expect.stringMatching(/^key_[0-9a-z]{26}$/),
      secret: expect.stringMatching(/^svc_test_[A-Za-z0-9_-]{43,}$/),
      mode: 'test',
      scopes: [...SCOPES],
      project_id: expect.stringMatching(/^proj_/),
      name: null,
    });
    expect(k.project_id).not.toBe(project.id); // the installation's default project
    minted.test = k;
  }, SPAWN_TIMEOUT);

  it('GIVEN a project and a scope list WHEN `keys create --mode live --project <id> --scopes merchants:read --json` THEN a narrowed live key', async () => {
    const k = oneJsonLine(await cli('keys', 'create', '--mode', 'live', '--project', project.id, '--scopes', 'merchants:read', '--json'));
    expect(k.secret).toMatch(/^svc_live_/);
    expect(k).toMatchObject({ mode: 'live', scopes: ['merchants:read'], project_id: project.id });
    minted.live = k;
  }, SPAWN_TIMEOUT);

  it('GIVEN a key WHEN `keys revoke <id>` THEN it reports the revocation', async () => {
    const k = oneJsonLine(await cli('keys', 'create', '--mode', 'test', '--project', project.id, '--name', 'doomed', '--json'));
    expect(k.name).toBe('doomed');
    minted.revoked = k;
    const r = await cli('keys', 'revoke', k.id);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    expect(lines(r.stdout)).toEqual([`revoked ${k.id}`]);
  }, SPAWN_TIMEOUT);

  it('GIVEN projects and keys WHEN `projects list --json` and `keys list --json` THEN they list them without secrets; revoked keys only with --revoked', async () => {
    // One at a time: embedded PGlite admits one process per data directory.
    const projects = await cli('projects', 'list', '--json');
    const keys = await cli('keys', 'list', '--json');
    const all = await cli('keys', 'list', '--revoked', '--json');
    const live = await cli('keys', 'list', '--mode', 'live', '--project', project.id, '--json');
    const text = await cli('keys', 'list');
    const plist = oneJsonLine(projects) as { id: string; name: string; is_default: boolean }[];
    expect(plist.map((p) => p.id)).toEqual(expect.arrayContaining([project.id, minted.test!.project_id]));
    expect(plist.find((p) => p.id === minted.test!.project_id)).toMatchObject({ name: 'Default project', is_default: true });
    const active = oneJsonLine(keys) as { id: string; last4: string; revoked_at: string | null }[];
    expect(active.map((k) => k.id).sort()).toEqual([minted.test!.id, minted.live!.id].sort());
    expect(active.find((k) => k.id === minted.test!.id)!.last4).toBe(minted.test!.secret.slice(-4));
    expect((oneJsonLine(all) as { id: string; revoked_at: string | null }[]).find((k) => k.id === minted.revoked!.id)!.revoked_at).toMatch(/^\d{4}-/);
    expect((oneJsonLine(live) as { id: string }[]).map((k) => k.id)).toEqual([minted.live!.id]);
    expect(text.code, text.stderr).toBe(0);
    expect(lines(text.stdout)).toHaveLength(2);
    for (const r of [keys, all, live, text]) for (const m of Object.values(minted)) expect(r.stdout).not.toContain(m.secret);
  }, SPAWN_TIMEOUT);

  it('GIVEN --help THEN the usage (with every command) on stdout and exit 0, without opening the database', async () => {
    for (const args of [['--help'], ['-h'], ['keys', 'list', '--help']]) {
      const r = await run(CLI, args, { ...cliEnv(), SVC_DATA_DIR: '/nonexistent/dir/that/cannot/be/created', DATABASE_URL: undefined });
      expect(r.code, r.stderr).toBe(0);
      expect(r.stderr).toBe('');
      for (const cmd of ['projects create', 'projects list', 'keys create', 'keys list', 'keys revoke', '--help']) expect(r.stdout).toContain(cmd);
    }
  }, SPAWN_TIMEOUT);

  it('GIVEN an unknown command or flag THEN exit 2 with one line naming it', async () => {
    // Refused before the database opens, so they may run side by side.
    const [frob, rotate, flag] = await Promise.all([cli('frobnicate'), cli('keys', 'rotate', 'key_x'), cli('keys', 'list', '--colour')]);
    expect(frob.code).toBe(2);
    expect(oneLineFailure(frob)).toContain('unknown command "frobnicate"');
    expect(oneLineFailure(rotate)).toMatch(/unknown command "keys rotate".*create, list, revoke/);
    expect(oneLineFailure(flag)).toContain('--colour');
  }, SPAWN_TIMEOUT);

  it('GIVEN bad input WHEN running the CLI THEN it exits non-zero with a one-line message on stderr', async () => {
    expect(oneLineFailure(await cli('keys', 'create', '--mode', 'test', '--scopes', 'merchants:read,bogus:scope', '--json'))).toContain('bogus:scope');
    expect(oneLineFailure(await cli('keys', 'create', '--mode', 'prod', '--json'))).toContain('--mode');
  }, SPAWN_TIMEOUT);

  describe('the server booted on the CLI-written database', () => {
    let services: Services;
    let server: Server;
    let base: string;
    beforeAll(async () => {
      const config = loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent', SVC_DATA_DIR: dataDir, SVC_MASTER_KEY: masterKey, ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) });
      services = await createServices(config);
      const app = buildApp(services, { responseValidation: true });
      await new Promise<void>((ok) => {
        server = app.listen(0, '127.0.0.1', () => ok());
      });
      base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    afterAll(async () => {
      if (server) await new Promise<void>((ok) => server.close(() => ok()));
      await services?.orm.close(true);
    });

    const call = async (method: string, path: string, secret: string, body?: unknown): Promise<ApiResponse> => {
      const res = await fetch(base + path, {
        method,
        headers: { authorization: `Bearer ${secret}`, ...(body ? { 'content-type': 'application/json' } : {}) },
        body: body ? JSON.stringify(body) : undefined,
      });
      const text = await res.text();
      return { status: res.status, headers: res.headers, text, body: text ? JSON.parse(text) : undefined };
    };

    it('GIVEN the minted keys WHEN used against the API THEN modes, scopes, projects and the revocation hold', async () => {
      const live = await call('GET', '/v1/me', minted.live!.secret);
      expect(live.status, live.text).toBe(200);
      expect(live.body).toMatchObject({
        key: { id: minted.live!.id, mode: 'live', scopes: ['merchants:read'], last4: minted.live!.secret.slice(-4) },
        project: { id: project.id, name: 'Acme', organization_id: project.organization_id },
        livemode: true,
      });
      expect((await call('GET', '/v1/merchants', minted.live!.secret)).status).toBe(200);
      expectError(await call('POST', '/v1/merchants', minted.live!.secret, merchantBody()), 403, 'INSUFFICIENT_SCOPE');

      const test = await call('GET', '/v1/me', minted.test!.secret);
      expect(test.body).toMatchObject({ key: { id: minted.test!.id, mode: 'test' }, project: { id: minted.test!.project_id }, livemode: false });
      expect((await call('POST', '/v1/merchants', minted.test!.secret, merchantBody())).status).toBe(201);

      expectError(await call('GET', '/v1/me', minted.revoked!.secret), 401, 'INVALID_API_KEY');
    });
  });
});

describe('server configuration', () => {
  it('GIVEN PORT=abc WHEN the server starts THEN it exits non-zero with one stderr line naming PORT', async () => {
    const r = await run(MAIN, [], { PORT: 'abc', SVC_DATA_DIR: dataDir, SVC_MASTER_KEY: masterKey, DATABASE_URL: undefined });
    const msg = oneLineFailure(r);
    expect(msg).toContain('PORT');
    expect(msg).not.toMatch(/\bat\s+\S+\s+\(/);
  }, SPAWN_TIMEOUT);

  it('GIVEN other bad variables WHEN the server starts THEN each is named on one stderr line', async () => {
    const cases: Array<[Record<string, string>, string]> = [
      [{ DATABASE_URL: 'mysql://localhost/x' }, 'DATABASE_URL'],
      [{ SVC_MASTER_KEY: 'short' }, 'SVC_MASTER_KEY'],
      [{ PORT: '70000' }, 'PORT'],
      [{ NODE_ENV: 'production', SVC_MASTER_KEY: '', SVC_PUBLIC_BASE_URL: 'https://checkout.example.com' }, 'SVC_MASTER_KEY'],
    ];
    // These stop before any database is opened, so they can run side by side.
    const runs = await Promise.all(
      cases.map(([env]) => run(MAIN, [], { SVC_DATA_DIR: join(dataDir, 'unused'), SVC_MASTER_KEY: masterKey, DATABASE_URL: undefined, PORT: '0', ...env })),
    );
    runs.forEach((r, i) => expect(oneLineFailure(r), JSON.stringify(cases[i]![0])).toContain(cases[i]![1]));
  }, SPAWN_TIMEOUT);
});
