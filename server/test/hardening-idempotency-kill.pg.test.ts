import { spawn, type ChildProcess } from 'node:child_process';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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


describe('hardening: kill -9 of a server mid-request (issue 9.2, PostgreSQL)', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null) child.kill('SIGKILL');
  });

  it('GIVEN a second server process killed with SIGKILL while holding an Idempotency-Key WHEN the client retries on the first THEN it succeeds within the lease (about 15 s)', async () => {
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
    // One process (no tsx wrapper), so SIGKILL really kills the server.
    child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'server/src/main.ts')], { cwd: ROOT, env, stdio: 'ignore' });
    const other = `http://127.0.0.1:${port}`;
    const up = Date.now();
    for (;;) {
      const ok = await fetch(`${other}/healthz`).then((r) => r.ok, () => false);
      if (ok) break;
      if (Date.now() - up > 30_000) throw new Error('second server did not start');
      await new Promise((r) => setTimeout(r, 200));
    }

    const body = merchantBody();
    const idemKey = `kill-${ulid()}`;
    const headers = { authorization: `Bearer ${key.secret}`, 'content-type': 'application/json', 'idempotency-key': idemKey };
    // Hold the merchants table so the request claims its key, then blocks in the insert.
    const locker = app.services.orm.em.fork();
    let released!: () => void;
    const holding = locker.transactional(async (tx) => {
      await tx.execute('lock table merchants in access exclusive mode');
      await new Promise<void>((r) => (released = r));
    });
    await new Promise((r) => setTimeout(r, 50));
    void fetch(`${other}/v1/merchants`, { method: 'POST', headers, body: JSON.stringify(body) }).catch(() => undefined);
    const waited = Date.now();
    while ((await sql(app, 'select 1 from idempotency_keys where idem_key = ?', [idemKey])).length === 0) {
      if (Date.now() - waited > 10_000) throw new Error('the request never claimed its key');
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    released();
    await holding;

    const killedAt = Date.now();
    let res = await post(idemKey, body);
    expectError(res, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    while (res.status === 409 && Date.now() - killedAt < 25_000) {
      await new Promise((r) => setTimeout(r, 500));
      res = await post(idemKey, body);
    }
    expect(res.status, res.text).toBe(201);
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(1);
  }, 60_000);
});
