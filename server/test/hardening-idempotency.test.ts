import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { canonicalJson, sha256Hex } from '../src/lib/canonical-json.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { expectError, sql } from './helpers/foundation.js';

let app: TestApp;
let key: TestKey;

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
});
afterAll(async () => app?.stop());

/** The key row a process leaves behind when it dies (kill -9) while running the request. */
async function leaveDeadClaim(idemKey: string, body: unknown, ageSql: string) {
  const hash = sha256Hex(`POST /v1/merchants\n${canonicalJson(body)}`);
  await sql(app, `insert into idempotency_keys (id, scope_key, idem_key, request_hash, created_at) values (?, ?, ?, ?, now() - ${ageSql})`, [
    `idem_${ulid().toLowerCase()}`,
    `${key.projectId}:test`,
    idemKey,
    hash,
  ]);
}

const post = (idemKey: string, body: unknown) => app.request('POST', '/v1/merchants', { key, body, headers: { 'idempotency-key': idemKey } });

describe('hardening: an Idempotency-Key whose request died is reclaimable (issue 9.2)', () => {
  it('GIVEN a key left in progress by a process killed 12 s ago WHEN the client retries THEN within seconds the request runs once and later retries replay it', async () => {
    const body = merchantBody();
    const idemKey = `crash-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '12 seconds'");
    const started = Date.now();
    let res = await post(idemKey, body);
    while (res.status === 409 && Date.now() - started < 8_000) {
      expectError(res, 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
      await new Promise((r) => setTimeout(r, 250));
      res = await post(idemKey, body);
    }
    expect(res.status, res.text).toBe(201);
    expect(Date.now() - started).toBeLessThan(6_000);
    const replay = await post(idemKey, body);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(res.text);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(1);
  }, 15_000);

  it('GIVEN a key left in progress a day minus a minute ago WHEN the client retries THEN it runs at once (no 24 h wait)', async () => {
    const body = merchantBody();
    const idemKey = `crash-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '23 hours 59 minutes'");
    const res = await post(idemKey, body);
    expect(res.status, res.text).toBe(201);
  });

  it('GIVEN a key whose request is alive (lease in the future) WHEN retried THEN 409 IN_PROGRESS, and another body is still 409 REUSED', async () => {
    const body = merchantBody();
    const idemKey = `live-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '0 seconds'");
    expectError(await post(idemKey, body), 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    expectError(await post(idemKey, merchantBody()), 409, 'IDEMPOTENCY_KEY_REUSED');
  });

  it('GIVEN a request that completes normally THEN its row keeps no lease and its replay is byte for byte the same', async () => {
    const body = merchantBody();
    const idemKey = `ok-${ulid()}`;
    const first = await post(idemKey, body);
    expect(first.status).toBe(201);
    const rows = await sql(app, 'select status, locked_until from idempotency_keys where idem_key = ?', [idemKey]);
    expect(rows).toEqual([{ status: 201, locked_until: null }]);
    const again = await post(idemKey, body);
    expect(again.text).toBe(first.text);
  });
});
