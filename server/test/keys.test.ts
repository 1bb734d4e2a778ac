import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCOPES } from '@svc/contract';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

const me = (secret: string) => app.request('GET', '/v1/me', { key: secret });
const mint = (key: TestKey | string, body: Record<string, unknown>) => app.request('POST', '/v1/keys', { key, body });

describe('API keys: list and create', () => {
  it('GIVEN a key WHEN it mints a key THEN the secret is shown once, works, and the list shows the key without it', async () => {
    const admin = await app.key('test');
    const created = await mint(admin, { mode: 'test', name: 'ci' });
    expect(created.status, created.text).toBe(201);
    expect(created.body).toMatchObject({ name: 'ci', mode: 'test', restricted: false, revoked_at: null, expires_at: null, rolled_to: null, last_used_at: null });
    expect(created.body.secret).toMatch(/^svc_test_[A-Za-z0-9_-]{43}$/);
    expect(created.body.last4).toBe(created.body.secret.slice(-4));
    expect([...created.body.scopes].sort()).toEqual([...SCOPES].sort());

    const whoami = await me(created.body.secret);
    expect(whoami.status).toBe(200);
    expect(whoami.body.key.id).toBe(created.body.id);

    const list = await app.request('GET', '/v1/keys', { key: admin });
    expect(list.status).toBe(200);
    expect(list.body.data.map((k: any) => k.id)).toEqual([created.body.id, admin.id]);
    expect(list.text).not.toContain(created.body.secret);
    for (const k of list.body.data) expect(k).not.toHaveProperty('secret');
    // Used once above: last_used_at is now set.
    expect(list.body.data[0].last_used_at).not.toBeNull();
  });

  it('GIVEN many keys WHEN listed with a limit THEN pages follow next_cursor newest first', async () => {
    const admin = await app.key('test');
    const ids = [admin.id];
    for (let i = 0; i < 3; i++) ids.push((await mint(admin, { mode: 'test' })).body.id);
    const first = await app.request('GET', '/v1/keys?limit=2', { key: admin });
    expect(first.body).toMatchObject({ has_more: true });
    const second = await app.request('GET', `/v1/keys?limit=2&cursor=${first.body.next_cursor}`, { key: admin });
    expect(second.body.has_more).toBe(false);
    expect([...first.body.data, ...second.body.data].map((k: any) => k.id)).toEqual([...ids].reverse());
    expectError(await app.request('GET', '/v1/keys?cursor=mrch_x', { key: admin }), 400, 'VALIDATION_FAILED');
  });

  it('GIVEN a restricted key WHEN it mints THEN only subsets of its own scopes are allowed, and it cannot use routes outside them', async () => {
    const admin = await app.key('test');
    const restricted = await mint(admin, { mode: 'test', scopes: ['keys:read', 'keys:write', 'orders:read'] });
    expect(restricted.status, restricted.text).toBe(201);
    expect(restricted.body.restricted).toBe(true);
    const secret = restricted.body.secret as string;

    const escalate = await mint(secret, { mode: 'test', scopes: ['orders:read', 'merchants:write'] });
    expectError(escalate, 403, 'INSUFFICIENT_SCOPE');
    expect(escalate.body.error_human).toContain('merchants:write');
    // The default is the caller's own scopes, never more.
    const child = await mint(secret, { mode: 'test' });
    expect(child.status).toBe(201);
    expect([...child.body.scopes].sort()).toEqual(['keys:read', 'keys:write', 'orders:read']);
    const narrower = await mint(secret, { mode: 'test', scopes: ['orders:read'] });
    expect(narrower.body.scopes).toEqual(['orders:read']);
    expectError(await app.request('GET', '/v1/keys', { key: narrower.body.secret }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('GET', '/v1/merchants', { key: secret }), 403, 'INSUFFICIENT_SCOPE');
    expect((await app.request('GET', '/v1/orders', { key: narrower.body.secret })).status).toBe(200);
  });

  it('GIVEN a test key WHEN it asks for a live key THEN 403 KEY_MODE_FORBIDDEN; a live key cannot mint test keys either', async () => {
    const test = await app.key('test');
    expectError(await mint(test, { mode: 'live' }), 403, 'KEY_MODE_FORBIDDEN');
    const live = await app.key('live', { projectId: test.projectId });
    expectError(await mint(live, { mode: 'test' }), 403, 'KEY_MODE_FORBIDDEN');
    const liveChild = await mint(live, { mode: 'live' });
    expect(liveChild.body.secret).toMatch(/^svc_live_/);
    // Modes are kept apart in the list too.
    const testList = await app.request('GET', '/v1/keys', { key: test });
    expect(testList.body.data.map((k: any) => k.id)).toEqual([test.id]);
  });

  it('GIVEN bad bodies WHEN minting THEN 400 VALIDATION_FAILED', async () => {
    const admin = await app.key('test');
    expectError(await mint(admin, { mode: 'test', scopes: [] }), 400, 'VALIDATION_FAILED');
    expectError(await mint(admin, { mode: 'test', scopes: ['root'] }), 400, 'VALIDATION_FAILED');
    expectError(await mint(admin, { mode: 'prod' }), 400, 'VALIDATION_FAILED');
    expectError(await mint(admin, { mode: 'test', secret: 'mine' }), 400, 'VALIDATION_FAILED');
  });
});

describe('API keys: roll and revoke', () => {
  it('GIVEN a key rolled with the default grace period WHEN time passes THEN the old secret works for 24 h and not after, the new one throughout', async () => {
    const admin = await app.key('test');
    const target = (await mint(admin, { mode: 'test', name: 'server', scopes: ['orders:read'] })).body;
    // the service clock held at the instant of the roll: the grace period is counted from it
    const realNow = app.services.now;
    const rolledAt = new Date(Math.floor(Date.now() / 1000) * 1000);
    app.services.now = () => rolledAt;
    let rolled;
    try {
      rolled = await app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: {} });
    } finally {
      app.services.now = realNow;
    }
    expect(rolled.status, rolled.text).toBe(200);
    expect(rolled.body).toMatchObject({ name: 'server', mode: 'test', scopes: ['orders:read'] });
    expect(rolled.body.secret).not.toBe(target.secret);

    const list = await app.request('GET', '/v1/keys', { key: admin });
    const old = list.body.data.find((k: any) => k.id === target.id);
    expect(old.rolled_to).toBe(rolled.body.id);
    expect(Date.parse(old.expires_at)).toBe(rolledAt.getTime() + 86_400_000);

    expect((await me(target.secret)).status).toBe(200);
    try {
      app.services.now = () => new Date(Date.parse(old.expires_at) - 1000);
      expect((await me(target.secret)).status).toBe(200);
      app.services.now = () => new Date(Date.parse(old.expires_at) + 1000);
      expectError(await me(target.secret), 401, 'INVALID_API_KEY');
      expect((await me(rolled.body.secret)).status).toBe(200);
    } finally {
      app.services.now = realNow;
    }
    // A rolled key cannot be rolled again: roll its successor.
    expectError(await app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: {} }), 409, 'KEY_NOT_ACTIVE');
  });

  it('GIVEN grace_period_seconds 0 WHEN a key is rolled THEN the old secret stops at once', async () => {
    const admin = await app.key('test');
    const target = (await mint(admin, { mode: 'test' })).body;
    const rolled = await app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: { grace_period_seconds: 0 } });
    expect(rolled.status).toBe(200);
    expectError(await me(target.secret), 401, 'INVALID_API_KEY');
    expect((await me(rolled.body.secret)).status).toBe(200);
    expectError(await app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: { grace_period_seconds: 8 * 86_400 } }), 400, 'VALIDATION_FAILED');
  });

  it('GIVEN a restricted key WHEN it rolls a key with more scopes THEN 403: rolling hands out the secret, so no escalation', async () => {
    const admin = await app.key('test');
    const keysOnly = (await mint(admin, { mode: 'test', scopes: ['keys:read', 'keys:write'] })).body;
    expectError(await app.request('POST', `/v1/keys/${admin.id}/roll`, { key: keysOnly.secret, body: {} }), 403, 'INSUFFICIENT_SCOPE');
    expect((await me(admin.secret)).status).toBe(200);
  });

  it('GIVEN two rolls of one key at the same moment THEN exactly one succeeds', async () => {
    const admin = await app.key('test');
    const target = (await mint(admin, { mode: 'test' })).body;
    const results = await Promise.all([0, 1].map(() => app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: {} })));
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    const rows = await sql(app, 'select count(*)::int as n from api_keys where project_id = ?', [admin.projectId]);
    expect(rows[0]!.n).toBe(3);
  });

  it('GIVEN a key WHEN revoked THEN it stops at once, revoking again returns it unchanged, and other projects and modes see 404', async () => {
    const admin = await app.key('test');
    const target = (await mint(admin, { mode: 'test' })).body;
    const revoked = await app.request('DELETE', `/v1/keys/${target.id}`, { key: admin });
    expect(revoked.status, revoked.text).toBe(200);
    expect(revoked.body.revoked_at).not.toBeNull();
    expectError(await me(target.secret), 401, 'INVALID_API_KEY');
    const again = await app.request('DELETE', `/v1/keys/${target.id}`, { key: admin });
    expect(again.body.revoked_at).toBe(revoked.body.revoked_at);
    expectError(await app.request('POST', `/v1/keys/${target.id}/roll`, { key: admin, body: {} }), 409, 'KEY_NOT_ACTIVE');

    const stranger = await app.key('test');
    expectError(await app.request('DELETE', `/v1/keys/${admin.id}`, { key: stranger }), 404, 'NOT_FOUND');
    const live = await app.key('live', { projectId: admin.projectId });
    expectError(await app.request('DELETE', `/v1/keys/${admin.id}`, { key: live }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', '/v1/keys/not-a-key', { key: admin }), 404, 'NOT_FOUND');
    expect((await me(admin.secret)).status).toBe(200);
  });

  it('GIVEN minted and rolled keys WHEN the database is dumped THEN no secret appears in it', async () => {
    const admin = await app.key('test');
    const a = (await mint(admin, { mode: 'test' })).body;
    const b = (await app.request('POST', `/v1/keys/${a.id}/roll`, { key: admin, body: {} })).body;
    const dump = JSON.stringify(await sql(app, 'select row_to_json(k) as r from api_keys k'));
    for (const secret of [admin.secret, a.secret, b.secret]) {
      expect(dump).not.toContain(secret);
      expect(dump).not.toContain(secret.slice(9, 30));
    }
  });
});
