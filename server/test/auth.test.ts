import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES, type Scope } from '@svc/contract';
import { revokeApiKey } from '../src/modules/accounts/service.js';
import { expectError, sql } from './helpers/foundation.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

const allBut = (...drop: Scope[]) => SCOPES.filter((s) => !drop.includes(s));

describe('authentication', () => {
  it('GIVEN no Authorization header WHEN calling a key route THEN 401 UNAUTHENTICATED', async () => {
    expectError(await app.request('GET', '/v1/me'), 401, 'UNAUTHENTICATED');
    expectError(await app.request('GET', '/v1/merchants'), 401, 'UNAUTHENTICATED');
    // A write with a body that would fail validation still answers the auth failure first.
    expectError(await app.request('POST', '/v1/merchants', { body: { nope: true } }), 401, 'UNAUTHENTICATED');
  });

  it('GIVEN an Authorization header that is not a Bearer key WHEN calling THEN 401 UNAUTHENTICATED', async () => {
    expectError(await app.request('GET', '/v1/me', { headers: { authorization: 'Basic dXNlcjpwYXNz' } }), 401, 'UNAUTHENTICATED');
    expectError(await app.request('GET', '/v1/me', { headers: { authorization: 'Bearer' } }), 401, 'UNAUTHENTICATED');
  });

  it('GIVEN a malformed or unknown key WHEN calling THEN 401 INVALID_API_KEY', async () => {
    const key = await app.key('test');
    const random = key.secret.slice('svc_test_'.length);
    const cases = [
      'not-a-key',
      'svc_test_short',
      'sk_test_' + random,
      'svc_test_' + 'A'.repeat(43), // well-formed, never minted
      'svc_live_' + random, // a real secret body under the other mode's prefix
      key.secret.slice(0, -1) + (key.secret.endsWith('A') ? 'B' : 'A'), // one character off
    ];
    for (const secret of cases) {
      expectError(await app.request('GET', '/v1/me', { key: secret }), 401, 'INVALID_API_KEY');
    }
    // THEN the genuine key still works (the cases above failed for the right reason).
    expect((await app.request('GET', '/v1/me', { key })).status).toBe(200);
  });

  it('GIVEN a revoked key WHEN calling THEN 401 INVALID_API_KEY, while a sibling key keeps working', async () => {
    const key = await app.key('test');
    const sibling = await app.key('test', { projectId: key.projectId });
    expect((await app.request('GET', '/v1/me', { key })).status).toBe(200);

    expect(await revokeApiKey(app.services.orm.em.fork(), key.id, app.services.now())).toBe(true);

    expectError(await app.request('GET', '/v1/me', { key }), 401, 'INVALID_API_KEY');
    expectError(await app.request('POST', '/v1/merchants', { key, body: merchantBody() }), 401, 'INVALID_API_KEY');
    expect((await app.request('GET', '/v1/me', { key: sibling })).status).toBe(200);
  });
});

describe('scopes', () => {
  // Each scope family: a read route and a write route, with the scope each one needs.
  const families: Array<{ family: string; read: [string, string, Scope]; write: [string, string, Scope, unknown] }> = [
    { family: 'merchants', read: ['GET', '/v1/merchants', 'merchants:read'], write: ['POST', '/v1/merchants', 'merchants:write', merchantBody()] },
    {
      family: 'products',
      read: ['GET', '/v1/catalog', 'products:read'],
      write: ['POST', '/v1/catalog', 'products:write', { sku: 'S-1', name: 'Thing', price: { amount: '1.00', currency: 'USD' } }],
    },
    { family: 'policy', read: ['GET', '/v1/policy', 'policy:read'], write: ['PUT', '/v1/policy', 'policy:write', { body: {} }] },
  ];

  for (const { family, read, write } of families) {
    it(`GIVEN a key without ${family} scopes WHEN calling ${family} routes THEN 403 INSUFFICIENT_SCOPE naming the scope`, async () => {
      const owner = await app.key('test');
      expect((await app.request('POST', '/v1/merchants', { key: owner, body: merchantBody() })).status).toBe(201);
      const narrowed = await app.key('test', { projectId: owner.projectId, scopes: allBut(read[2], write[2]) });

      const r = await app.request(read[0], read[1], { key: narrowed });
      expectError(r, 403, 'INSUFFICIENT_SCOPE');
      expect(r.body.error_human).toContain(read[2]);
      const w = await app.request(write[0], write[1], { key: narrowed, body: write[3] });
      expectError(w, 403, 'INSUFFICIENT_SCOPE');
      expect(w.body.error_human).toContain(write[2]);

      // A read-only key reads but cannot write.
      const readOnly = await app.key('test', { projectId: owner.projectId, scopes: [read[2]] });
      expect((await app.request(read[0], read[1], { key: readOnly })).status).toBe(200);
      expectError(await app.request(write[0], write[1], { key: readOnly, body: write[3] }), 403, 'INSUFFICIENT_SCOPE');
    });
  }

  it('GIVEN a key with only merchants:read WHEN calling validate and publish THEN validate passes the scope check and publish is 403', async () => {
    const owner = await app.key('test');
    expect((await app.request('POST', '/v1/merchants', { key: owner, body: merchantBody() })).status).toBe(201);
    const readOnly = await app.key('test', { projectId: owner.projectId, scopes: ['merchants:read'] });
    expect((await app.request('POST', '/v1/validate', { key: readOnly })).status).toBe(200);
    expectError(await app.request('POST', '/v1/publish', { key: readOnly }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('PUT', '/v1/receiving', { key: readOnly, body: { receiving: {} } }), 403, 'INSUFFICIENT_SCOPE');
  });
});

describe('GET /v1/me', () => {
  const check = async (key: TestKey, scopes: Scope[]) => {
    const res = await app.request('GET', '/v1/me', { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body.key.id).toBe(key.id);
    expect(res.body.key.id).toMatch(/^key_[0-9a-z]{26}$/);
    expect(res.body.key.mode).toBe(key.mode);
    expect([...res.body.key.scopes].sort()).toEqual([...scopes].sort());
    expect(res.body.key.last4).toBe(key.secret.slice(-4));
    expect(new Date(res.body.key.created_at).toISOString()).toBe(res.body.key.created_at);
    expect(res.body.project.id).toBe(key.projectId);
    expect(res.body.project.organization_id).toMatch(/^org_/);
    expect(res.body.livemode).toBe(key.mode === 'live');
    expect(res.text).not.toContain(key.secret.slice('svc_test_'.length));
    return res.body;
  };

  it('GIVEN a test key WHEN GET /v1/me THEN it reports the key, test mode, its scopes, last4 and project', async () => {
    const key = await app.key('test');
    expect(key.secret.startsWith('svc_test_')).toBe(true);
    await check(key, [...SCOPES]);
  });

  it('GIVEN a narrowed live key WHEN GET /v1/me THEN it reports live mode and exactly the narrowed scopes', async () => {
    const key = await app.key('live', { scopes: ['merchants:read', 'policy:read'] });
    expect(key.secret.startsWith('svc_live_')).toBe(true);
    await check(key, ['merchants:read', 'policy:read']);
  });
});

describe('key storage', () => {
  it('GIVEN a minted key WHEN reading its api_keys row THEN no column holds the secret, only a hash and the last four', async () => {
    const key = await app.key('test');
    const rows = await sql(app, 'select * from api_keys where id = ?', [key.id]);
    expect(rows).toHaveLength(1);
    const row = rows[0]!;
    const dump = JSON.stringify(row);
    const randomPart = key.secret.slice('svc_test_'.length);
    expect(dump).not.toContain(key.secret);
    expect(dump).not.toContain(randomPart);
    // Not even a long slice of it (only the last four characters are kept).
    expect(dump).not.toContain(randomPart.slice(0, 12));
    expect(dump).not.toContain(randomPart.slice(-12));
    expect(row.last4).toBe(key.secret.slice(-4));
    expect(row.secret_hash).toMatch(/^[0-9a-f]{64}$/);
  });
});
