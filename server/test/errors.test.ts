import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, onPostgres, sql } from './helpers/foundation.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let key: TestKey;
beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  const m = await app.request('POST', '/v1/merchants', { key, body: merchantBody() });
  expect(m.status, m.text).toBe(201);
});
afterAll(async () => app?.stop());

/**
 * Takes the database away for good. On PostgreSQL: refuse new connections and terminate
 * the open ones. PGlite runs in-process and MikroORM reconnects lazily after `close()`,
 * so there the ORM is closed and its reconnect made to fail the way a refused connect does.
 */
async function cutDatabase() {
  if (onPostgres) {
    const [row] = await sql<{ db: string }>(app, 'select current_database() as db');
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`alter database "${row!.db}" allow_connections false`);
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [row!.db]);
    await admin.end();
    return;
  }
  const connection = app.services.orm.em.getConnection();
  await app.services.orm.close(true);
  connection.connect = async () => {
    throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
  };
}

describe('request parsing', () => {
  it('GIVEN malformed JSON WHEN posted THEN 400 BAD_REQUEST', async () => {
    for (const raw of ['{', '{"slug":', "{'a':1}", '{"a":1}}', 'nope', '{"a":undefined}']) {
      expectError(await app.request('POST', '/v1/merchants', { key, rawBody: raw }), 400, 'BAD_REQUEST');
    }
    expectError(await app.request('PUT', '/v1/policy', { key, rawBody: '{"body":{' }), 400, 'BAD_REQUEST');
  });

  it('GIVEN a body over 256 KB WHEN posted THEN 413 PAYLOAD_TOO_LARGE; just under the limit is parsed', async () => {
    const big = JSON.stringify({ ...merchantBody(), name: 'x'.repeat(256 * 1024) });
    expectError(await app.request('POST', '/v1/merchants', { key, rawBody: big }), 413, 'PAYLOAD_TOO_LARGE');
    expectError(await app.request('PUT', '/v1/policy', { key, rawBody: big }), 413, 'PAYLOAD_TOO_LARGE');
    const under = JSON.stringify({ ...merchantBody(), name: 'x'.repeat(250 * 1024) });
    // Parsed, then refused by the schema (name is at most 200 characters), not by size.
    expectError(await app.request('POST', '/v1/merchants', { key, rawBody: under }), 400, 'VALIDATION_FAILED');
  });

  it('GIVEN a corrupt compressed body or an unsupported charset WHEN posted THEN 400 BAD_REQUEST', async () => {
    expectError(await app.request('POST', '/v1/merchants', { key, rawBody: 'not gzip', headers: { 'content-encoding': 'gzip' } }), 400, 'BAD_REQUEST');
    expectError(
      await app.request('POST', '/v1/merchants', { key, rawBody: '{}', headers: { 'content-type': 'application/json; charset=latin9' } }),
      400,
      'BAD_REQUEST',
    );
  });

  it('GIVEN a path that is not valid percent-encoding WHEN requested THEN 400 BAD_REQUEST', async () => {
    expectError(await app.request('GET', '/v1/merchants/%E0%A4%A', { key }), 400, 'BAD_REQUEST');
    expectError(await app.request('DELETE', '/v1/catalog/%ZZ', { key }), 400, 'BAD_REQUEST');
  });

  it('GIVEN JSON that Postgres or the canonical hash cannot hold WHEN posted THEN 400 VALIDATION_FAILED naming the field', async () => {
    const cases: Array<[string, string, string]> = [
      ['POST', '/v1/merchants', JSON.stringify(merchantBody({ name: 'a\u0000b' }))],
      ['POST', '/v1/catalog', JSON.stringify({ sku: 'N-1', name: 'n', price: { amount: '1', currency: 'USD' }, metadata: { note: 'x\u0000' } })],
      ['PUT', '/v1/policy', '{"body":{"maxPerTransactionUsd":1e999}}'],
      ['PUT', '/v1/policy', '{"body":{"blockedAgents":["\\ud800"]}}'],
      ['PUT', '/v1/policy', '{"body":{"\\u0000":1}}'],
      ['PUT', '/v1/policy', '{"body":{"__proto__":{"maxPerTransactionUsd":1}}}'],
      ['PUT', '/v1/policy', '{"body":' + '{"a":'.repeat(100) + '1' + '}'.repeat(100) + '}'],
    ];
    for (const [method, path, rawBody] of cases) {
      const res = await app.request(method, path, { key, rawBody });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, rawBody.slice(0, 60)).toMatch(/^body\./);
    }
    // Also with an Idempotency-Key (whose request hash must not choke on them first).
    expectError(
      await app.request('PUT', '/v1/policy', { key, rawBody: '{"body":{"x":1e999}}', headers: { 'idempotency-key': 'inf-1' } }),
      400,
      'VALIDATION_FAILED',
    );
    const rows = await sql(app, 'select count(*)::int as n from policy_versions');
    expect(Number(rows[0]!.n)).toBe(0);
  });

  it('GIVEN user input with line breaks echoed into an error WHEN answered THEN error_human stays one line', async () => {
    const res = await app.request('POST', '/v1/merchants', { key, body: { ...merchantBody(), 'evil\nkey\u2028x': 1 } });
    expectError(res, 400, 'VALIDATION_FAILED');
    const del = await app.request('DELETE', '/v1/catalog/line%0Abreak', { key });
    expectError(del, 404, 'NOT_FOUND');
  });
});

describe('routing', () => {
  it('GIVEN an unknown route or an unknown method on a known path WHEN requested THEN 404 NOT_FOUND', async () => {
    const cases: Array<[string, string]> = [
      ['GET', '/v1/nope'],
      ['GET', '/nope'],
      ['POST', '/v2/merchants'],
      ['DELETE', '/v1/merchants'],
      ['PUT', '/v1/merchants'],
      ['DELETE', '/v1/merchants/mrch_00000000000000000000000000'],
      ['POST', '/v1/merchants/mrch_00000000000000000000000000'],
      ['POST', '/v1/policy'],
      ['GET', '/v1/publish'],
      ['PUT', '/v1/catalog'],
      ['POST', '/healthz'],
    ];
    for (const [method, path] of cases) {
      expectError(await app.request(method, path, { key }), 404, 'NOT_FOUND');
      expectError(await app.request(method, path), 404, 'NOT_FOUND');
    }
  });

  it('GIVEN a CORS preflight WHEN OPTIONS on a known or unknown path THEN 204 advertising Authorization, Content-Type and Idempotency-Key', async () => {
    for (const path of ['/v1/merchants', '/v1/does-not-exist']) {
      const res = await app.request('OPTIONS', path, {
        headers: { origin: 'https://dashboard.example.com', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,idempotency-key' },
      });
      expect(res.status).toBe(204);
      expect(res.text).toBe('');
      const allowed = (res.headers.get('access-control-allow-headers') ?? '').split(',').map((h) => h.trim().toLowerCase());
      expect(allowed).toEqual(expect.arrayContaining(['authorization', 'content-type', 'idempotency-key']));
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('access-control-allow-methods')).toContain('PATCH');
    }
  });
});

describe('error shape', () => {
  it('GIVEN a sweep of failing calls WHEN answered THEN every body has exactly reason_codes and error_human, with no stack trace', async () => {
    const other = await app.key('test');
    const calls: Array<[string, string, { key?: TestKey | string; body?: unknown; rawBody?: string }]> = [
      ['GET', '/v1/me', {}],
      ['GET', '/v1/me', { key: 'svc_test_bogus' }],
      ['GET', '/v1/merchants', { key: await app.key('test', { scopes: ['products:read'] }) }],
      ['POST', '/v1/merchants', { key, body: {} }],
      ['POST', '/v1/merchants', { key, body: merchantBody({ receiving: {} }) }],
      ['GET', '/v1/merchants?limit=0', { key }],
      ['GET', '/v1/merchants/mrch_00000000000000000000000000', { key }],
      ['GET', '/v1/catalog', { key: other }],
      ['POST', '/v1/catalog', { key, body: { sku: 'A', name: 'A', price: { amount: '1e5', currency: 'USD' } } }],
      ['PATCH', '/v1/catalog/none', { key, body: {} }],
      ['PUT', '/v1/policy', { key, body: { body: [] } }],
      ['PUT', '/v1/receiving', { key, body: { receiving: { x402: { chain: 'solana', address: 'x' } } } }],
      ['GET', '/v1/merchants/x/jwks', {}],
      ['POST', '/v1/merchants', { key, rawBody: '{' }],
      ['GET', '/nowhere', {}],
    ];
    for (const [method, path, opts] of calls) {
      const res = await app.request(method, path, opts);
      expect(res.status, `${method} ${path}`).toBeGreaterThanOrEqual(400);
      expectError(res, res.status, res.body.reason_codes?.[0]);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    }
  });
});

describe('Idempotency-Key', () => {
  it('GIVEN a POST /v1/merchants with an Idempotency-Key WHEN repeated THEN the stored response replays; another body is 409', async () => {
    const k = await app.key('test');
    const body = merchantBody();
    const headers = { 'idempotency-key': 'create-shop-1' };
    const first = await app.request('POST', '/v1/merchants', { key: k, body, headers });
    expect(first.status, first.text).toBe(201);
    expect(first.headers.get('idempotent-replayed')).toBeNull();
    const again = await app.request('POST', '/v1/merchants', { key: k, body, headers });
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    const list = await app.request('GET', '/v1/merchants', { key: k });
    expect(list.body.data.map((m: { id: string }) => m.id)).toEqual([first.body.id]);

    const reused = await app.request('POST', '/v1/merchants', { key: k, body: { ...body, name: 'Different' }, headers });
    expectError(reused, 409, 'IDEMPOTENCY_KEY_REUSED');
    // The same key on another route is a different request too.
    expectError(await app.request('POST', '/v1/catalog', { key: k, body: { sku: 'I', name: 'I', price: { amount: '1', currency: 'USD' } }, headers }), 409, 'IDEMPOTENCY_KEY_REUSED');

    // Without the header a repeat is an ordinary second create (here: the slug is taken).
    expectError(await app.request('POST', '/v1/merchants', { key: k, body }), 409, 'MERCHANT_SLUG_TAKEN');
    // Keys are scoped to the project: another project may use the same key freely.
    const stranger = await app.key('test');
    const theirs = await app.request('POST', '/v1/merchants', { key: stranger, body: merchantBody(), headers });
    expect(theirs.status).toBe(201);
    expect(theirs.headers.get('idempotent-replayed')).toBeNull();
  });

  it('GIVEN a failed create with an Idempotency-Key WHEN repeated THEN the same error replays', async () => {
    const k = await app.key('test');
    const headers = { 'idempotency-key': 'bad-create' };
    const body = merchantBody({ receiving: {} });
    const first = await app.request('POST', '/v1/merchants', { key: k, body, headers });
    expectError(first, 400, 'RECEIVING_NO_RAIL_ENABLED');
    const again = await app.request('POST', '/v1/merchants', { key: k, body, headers });
    expectError(again, 400, 'RECEIVING_NO_RAIL_ENABLED');
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });

  it('GIVEN a malformed Idempotency-Key WHEN posted THEN 400 VALIDATION_FAILED', async () => {
    expectError(await app.request('POST', '/v1/merchants', { key, body: merchantBody(), headers: { 'idempotency-key': 'x'.repeat(256) } }), 400, 'VALIDATION_FAILED');
  });
});

describe('health (runs last: it takes the database away)', () => {
  it('GIVEN a running app WHEN GET /healthz and /readyz THEN 200 without auth', async () => {
    const h = await app.request('GET', '/healthz');
    expect(h.status).toBe(200);
    expect(h.body).toEqual({ ok: true });
    const r = await app.request('GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ ok: true, db: true, live: { facilitator: 'none', ok: true, detail: expect.any(Object) } });
  });

  it('GIVEN the database becomes unreachable WHEN probed THEN /readyz is 503 DATABASE_UNAVAILABLE, /healthz stays 200, key routes answer 503', async () => {
    await cutDatabase();
    expectError(await app.request('GET', '/readyz'), 503, 'DATABASE_UNAVAILABLE');
    const h = await app.request('GET', '/healthz');
    expect(h.status).toBe(200);
    expect(h.body).toEqual({ ok: true });
    expectError(await app.request('GET', '/v1/me', { key }), 503, 'DATABASE_UNAVAILABLE');
    expectError(await app.request('GET', '/v1/merchants/mrch_00000000000000000000000000/jwks'), 503, 'DATABASE_UNAVAILABLE');
  });
});
