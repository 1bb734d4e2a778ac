import type { OrderEventObject } from '@svc/contract';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { createEndpoint, recordEvents } from './helpers/webhooks.js';
import { checkWebhookUrl, guardedLookup, isForbiddenAddress, outboundRules } from '../src/modules/webhooks/url.js';

let app: TestApp;
let key: TestKey;
beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
});
afterAll(async () => app?.stop());

const EP = '/v1/webhooks/endpoints';

describe('POST /v1/webhooks/endpoints', () => {
  it('creates a pending endpoint in the key\'s mode and shows the whsec_ secret once', async () => {
    // WHEN
    const res = await app.request('POST', EP, { key, body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['order.settled'] } });
    // THEN
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ url: 'http://127.0.0.1:9/hook', enabled_events: ['order.settled'], status: 'pending', livemode: false, disabled_reason: null });
    expect(res.body.id).toMatch(/^whk_[0-9a-z]{26}$/);
    expect(res.body.secret).toMatch(/^whsec_[A-Za-z0-9_-]{43}$/);
    const got = await app.request('GET', `${EP}/${res.body.id}`, { key });
    expect(got.status, got.text).toBe(200);
    expect(got.body).not.toHaveProperty('secret');
    expect(got.body).toEqual({ ...res.body, secret: undefined, updated_at: got.body.updated_at });
  });

  it('stores the secret encrypted, bound to the endpoint id', async () => {
    const { id, secret } = await createEndpoint(app, key, 'http://localhost:9/hook');
    const [row] = await sql(app, 'select secret_sealed from webhook_endpoints where id = ?', [id]);
    expect(row!.secret_sealed).not.toContain(secret.slice(6));
    expect(app.services.box.open(row!.secret_sealed, id)).toBe(secret);
    expect(() => app.services.box.open(row!.secret_sealed, 'whk_other')).toThrow();
  });

  it('rejects bad enabled_events with VALIDATION_FAILED naming the field', async () => {
    for (const enabled_events of [undefined, [], ['order.shipped'], ['*', 'order.settled'], ['order.held', 'order.held']]) {
      const res = await app.request('POST', EP, { key, body: { url: 'https://example.com/h', enabled_events } });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human).toContain('body.enabled_events');
    }
  });

  it('applies the URL rules per mode', async () => {
    const live = await app.key('live');
    const ok: Array<[TestKey, string]> = [
      [key, 'http://127.0.0.1:8080/h'],
      [key, 'http://localhost/h'],
      [key, 'http://[::1]:3000/h'],
      [key, 'https://example.com/h'],
      [live, 'https://hooks.example.com/svc'],
      [live, 'https://93.184.216.34/h'],
    ];
    for (const [k, url] of ok) {
      const res = await app.request('POST', EP, { key: k, body: { url, enabled_events: ['*'] } });
      expect(res.status, `${url}: ${res.text}`).toBe(201);
      expect(res.body.livemode).toBe(k.mode === 'live');
    }
    const bad: Array<[TestKey, string]> = [
      [key, 'http://example.com/h'],
      [key, 'http://10.0.0.1/h'],
      // Outside production a test endpoint may reach loopback, never a private address (lib/ssrf.ts).
      [key, 'https://10.1.2.3/h'],
      [key, 'ftp://example.com/h'],
      [key, 'not a url'],
      [key, 'https://user:pw@example.com/h'],
      [live, 'http://hooks.example.com/h'],
      [live, 'http://127.0.0.1/h'],
      [live, 'https://127.0.0.1/h'],
      [live, 'https://localhost/h'],
      [live, 'https://10.0.0.8/h'],
      [live, 'https://172.16.4.4/h'],
      [live, 'https://192.168.1.1/h'],
      [live, 'https://169.254.169.254/latest'],
      [live, 'https://[::1]/h'],
      [live, 'https://[fe80::1]/h'],
      [live, 'https://[fd00::1]/h'],
      [live, 'https://[::ffff:127.0.0.1]/h'],
      [live, 'https://2130706433/h'],
      [live, 'https://intranet/h'],
    ];
    for (const [k, url] of bad) {
      const res = await app.request('POST', EP, { key: k, body: { url, enabled_events: ['*'] } });
      expectError(res, 400, 'WEBHOOK_URL_INVALID');
      expect(res.body.error_human, url).toMatch(/^url: /);
    }
  });

  it('needs webhooks:write to create and webhooks:read to list', async () => {
    const reader = await app.key('test', { scopes: ['webhooks:read'], projectId: key.projectId });
    const writer = await app.key('test', { scopes: ['webhooks:write'], projectId: key.projectId });
    expectError(await app.request('POST', EP, { key: reader, body: { url: 'https://example.com/h', enabled_events: ['*'] } }), 403, 'INSUFFICIENT_SCOPE');
    expect((await app.request('GET', EP, { key: reader })).status).toBe(200);
    expectError(await app.request('GET', EP, { key: writer }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('GET', '/v1/events', { key: writer }), 403, 'INSUFFICIENT_SCOPE');
    expectError(await app.request('GET', EP), 401, 'UNAUTHENTICATED');
  });

  it('caps a project at 16 endpoints per mode', async () => {
    const k = await app.key('test');
    for (let i = 0; i < 16; i++) await createEndpoint(app, k, `https://example.com/h${i}`);
    expectError(await app.request('POST', EP, { key: k, body: { url: 'https://example.com/x', enabled_events: ['*'] } }), 422, 'WEBHOOK_ENDPOINT_LIMIT');
    // The live mode of the same project is counted on its own.
    const live = await app.key('live', { projectId: k.projectId });
    expect((await app.request('POST', EP, { key: live, body: { url: 'https://example.com/x', enabled_events: ['*'] } })).status).toBe(201);
  });
});

describe('endpoint management', () => {
  it('lists newest first with cursor pagination', async () => {
    const k = await app.key('test');
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await createEndpoint(app, k, `https://example.com/p${i}`)).id);
    const p1 = await app.request('GET', `${EP}?limit=2`, { key: k });
    expect(p1.status, p1.text).toBe(200);
    expect(p1.body.data.map((e: any) => e.id)).toEqual([ids[2], ids[1]]);
    expect(p1.body.has_more).toBe(true);
    expect(p1.body.data[0]).not.toHaveProperty('secret');
    const p2 = await app.request('GET', `${EP}?limit=2&cursor=${p1.body.next_cursor}`, { key: k });
    expect(p2.body).toEqual({ data: [expect.objectContaining({ id: ids[0] })], has_more: false, next_cursor: null });
    expectError(await app.request('GET', `${EP}?cursor=nope`, { key: k }), 400, 'VALIDATION_FAILED');
  });

  it('updates url, enabled_events and description, and disables and re-enables', async () => {
    const { id } = await createEndpoint(app, key, 'https://example.com/a', ['order.settled']);
    const upd = await app.request('PATCH', `${EP}/${id}`, {
      key,
      body: { url: 'https://example.com/b', enabled_events: ['order.held', 'order.rejected'], description: 'ops' },
    });
    expect(upd.status, upd.text).toBe(200);
    expect(upd.body).toMatchObject({ url: 'https://example.com/b', enabled_events: ['order.held', 'order.rejected'], description: 'ops', status: 'pending' });
    const off = await app.request('PATCH', `${EP}/${id}`, { key, body: { disabled: true } });
    expect(off.body).toMatchObject({ status: 'disabled', disabled_reason: 'manual' });
    const on = await app.request('PATCH', `${EP}/${id}`, { key, body: { disabled: false } });
    expect(on.body).toMatchObject({ status: 'pending', disabled_reason: null });
    expectError(await app.request('PATCH', `${EP}/${id}`, { key, body: { url: 'http://example.com/x' } }), 400, 'WEBHOOK_URL_INVALID');
    expectError(await app.request('PATCH', `${EP}/${id}`, { key, body: { status: 'enabled' } }), 400, 'VALIDATION_FAILED');
  });

  it('re-enables an endpoint that once succeeded as enabled', async () => {
    const { id } = await createEndpoint(app, key, 'https://example.com/c');
    await sql(app, "update webhook_endpoints set status = 'enabled', last_success_at = now() where id = ?", [id]);
    await app.request('PATCH', `${EP}/${id}`, { key, body: { disabled: true } });
    const on = await app.request('PATCH', `${EP}/${id}`, { key, body: { disabled: false } });
    expect(on.body.status).toBe('enabled');
  });

  it('deletes: 204, then 404 and gone from the list', async () => {
    const k = await app.key('test');
    const { id } = await createEndpoint(app, k, 'https://example.com/d');
    const del = await app.request('DELETE', `${EP}/${id}`, { key: k });
    expect(del.status, del.text).toBe(204);
    expectError(await app.request('GET', `${EP}/${id}`, { key: k }), 404, 'NOT_FOUND');
    expectError(await app.request('DELETE', `${EP}/${id}`, { key: k }), 404, 'NOT_FOUND');
    expect((await app.request('GET', EP, { key: k })).body.data).toEqual([]);
  });

  it('rotates the secret: a new one shown once, the old one signing for 24 h', async () => {
    const { id, secret } = await createEndpoint(app, key, 'https://example.com/r');
    // The application clock, pinned: the old secret's expiry is exactly 24 h after the rotation.
    const rotatedAt = new Date('2026-11-26T12:00:00.000Z');
    const realNow = app.services.now;
    app.services.now = () => rotatedAt;
    let rot;
    try {
      rot = await app.request('POST', `${EP}/${id}/rotate-secret`, { key });
    } finally {
      app.services.now = realNow;
    }
    expect(rot.status, rot.text).toBe(200);
    expect(rot.body.secret).toMatch(/^whsec_/);
    expect(rot.body.secret).not.toBe(secret);
    expect(rot.body.previous_secret_expires_at).toBe('2026-11-27T12:00:00.000Z');
    const [row] = await sql(app, 'select secret_sealed, previous_secret_sealed from webhook_endpoints where id = ?', [id]);
    expect(app.services.box.open(row!.secret_sealed, id)).toBe(rot.body.secret);
    expect(app.services.box.open(row!.previous_secret_sealed, id)).toBe(secret);
    expect((await app.request('GET', `${EP}/${id}`, { key })).body).not.toHaveProperty('secret');
  });

  it('answers 404 NOT_FOUND for another project\'s or mode\'s endpoint', async () => {
    const { id } = await createEndpoint(app, key, 'https://example.com/iso');
    const liveSameProject = await app.key('live', { projectId: key.projectId });
    const otherProject = await app.key('test');
    for (const k of [liveSameProject, otherProject]) {
      expectError(await app.request('GET', `${EP}/${id}`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('PATCH', `${EP}/${id}`, { key: k, body: { disabled: true } }), 404, 'NOT_FOUND');
      expectError(await app.request('POST', `${EP}/${id}/rotate-secret`, { key: k }), 404, 'NOT_FOUND');
      expectError(await app.request('DELETE', `${EP}/${id}`, { key: k }), 404, 'NOT_FOUND');
      expect((await app.request('GET', EP, { key: k })).body.data.map((e: any) => e.id)).not.toContain(id);
    }
    expectError(await app.request('GET', `${EP}/whk_nope`, { key }), 404, 'NOT_FOUND');
    expect((await app.request('GET', `${EP}/${id}`, { key })).body.status).toBe('pending');
  });
});

describe('events', () => {
  it('lists every event of the project and mode newest first, with cursor and type filter', async () => {
    const k = await app.key('test');
    const [a, b] = await recordEvents(app, k, ['order.accepted', 'order.settled']);
    const [c] = await recordEvents(app, k, ['order.held']);
    // Another project's and mode's events stay out.
    await recordEvents(app, await app.key('test'), ['order.settled']);
    await recordEvents(app, { projectId: k.projectId, mode: 'live' }, ['order.settled']);
    const all = await app.request('GET', '/v1/events', { key: k });
    expect(all.status, all.text).toBe(200);
    expect(all.body.data.map((e: any) => e.id)).toEqual([c!.id, b!.id, a!.id]);
    expect(all.body.data[1]).toEqual(b);
    const p1 = await app.request('GET', '/v1/events?limit=2', { key: k });
    expect(p1.body.data.map((e: any) => e.id)).toEqual([c!.id, b!.id]);
    const p2 = await app.request('GET', `/v1/events?limit=2&cursor=${p1.body.next_cursor}`, { key: k });
    expect(p2.body).toEqual({ data: [a], has_more: false, next_cursor: null });
    const held = await app.request('GET', '/v1/events?type=order.held', { key: k });
    expect(held.body.data.map((e: any) => e.id)).toEqual([c!.id]);
    expectError(await app.request('GET', '/v1/events?type=order.shipped', { key: k }), 400, 'VALIDATION_FAILED');
  });

  it('fans out one pending delivery per matching, non-disabled endpoint in the event\'s transaction', async () => {
    const k = await app.key('test');
    const all = await createEndpoint(app, k, 'http://127.0.0.1:9/all', ['*']);
    const settledOnly = await createEndpoint(app, k, 'http://127.0.0.1:9/settled', ['order.settled']);
    const off = await createEndpoint(app, k, 'http://127.0.0.1:9/off', ['*']);
    await app.request('PATCH', `${EP}/${off.id}`, { key: k, body: { disabled: true } });
    const liveOther = await createEndpoint(app, await app.key('live', { projectId: k.projectId }), 'https://example.com/live', ['*']);
    const [accepted, settled] = await recordEvents(app, k, ['order.accepted', 'order.settled']);
    const detail = async (id: string) => (await app.request('GET', `/v1/events/${id}`, { key: k })).body;
    const a = await detail(accepted!.id);
    expect(a.deliveries.map((d: any) => d.endpoint_id)).toEqual([all.id]);
    const s = await detail(settled!.id);
    expect(s.deliveries.map((d: any) => d.endpoint_id).sort()).toEqual([all.id, settledOnly.id].sort());
    expect(s.deliveries[0]).toMatchObject({ status: 'pending', replay: false, attempt_count: 0, attempts: [] });
    expect(JSON.stringify(s)).not.toContain(liveOther.id);
    expect(JSON.stringify(s)).not.toContain(off.id);
  });

  it('writes no delivery when the business transaction rolls back', async () => {
    const k = await app.key('test');
    const { id } = await createEndpoint(app, k, 'http://127.0.0.1:9/rb');
    await expect(
      app.services.orm.em.fork().transactional(async (tx) => {
        await app.services.events.record(tx, { projectId: k.projectId, merchantId: null, livemode: false, type: 'order.settled', object: { id: 'ord_x' } as OrderEventObject });
        throw new Error('business failure');
      }),
    ).rejects.toThrow('business failure');
    expect(await sql(app, 'select 1 from webhook_deliveries where endpoint_id = ?', [id])).toEqual([]);
    expect((await app.request('GET', '/v1/events', { key: k })).body.data).toEqual([]);
  });

  it('replays an event to the endpoints that match now', async () => {
    const k = await app.key('test');
    const [ev] = await recordEvents(app, k, ['order.settled']);
    const late = await createEndpoint(app, k, 'http://127.0.0.1:9/late', ['order.settled']);
    await createEndpoint(app, k, 'http://127.0.0.1:9/other', ['order.held']);
    const rep = await app.request('POST', `/v1/events/${ev!.id}/replay`, { key: k });
    expect(rep.status, rep.text).toBe(200);
    expect(rep.body).toEqual({ event_id: ev!.id, deliveries: [{ endpoint_id: late.id, status: 'pending' }] });
    const d = await app.request('GET', `/v1/events/${ev!.id}`, { key: k });
    expect(d.body.deliveries).toEqual([expect.objectContaining({ endpoint_id: late.id, replay: true, status: 'pending' })]);
  });

  it('answers 404 NOT_FOUND for another project\'s or mode\'s event', async () => {
    const k = await app.key('test');
    const [ev] = await recordEvents(app, k, ['order.settled']);
    for (const other of [await app.key('live', { projectId: k.projectId }), await app.key('test')]) {
      expectError(await app.request('GET', `/v1/events/${ev!.id}`, { key: other }), 404, 'NOT_FOUND');
      expectError(await app.request('POST', `/v1/events/${ev!.id}/replay`, { key: other }), 404, 'NOT_FOUND');
    }
    expectError(await app.request('GET', '/v1/events/evt_nope', { key: k }), 404, 'NOT_FOUND');
    expectError(await app.request('GET', '/v1/events?cursor=evt_00000000000000000000000000', { key: k }), 400, 'VALIDATION_FAILED');
  });
});

describe('URL guard', () => {
  it('classifies addresses', () => {
    for (const a of ['127.0.0.1', '10.2.3.4', '172.31.0.1', '192.168.0.1', '169.254.169.254', '100.64.0.1', '0.0.0.0', '::1', '::', 'fe80::1', 'fd12::1', '::ffff:10.0.0.1', '::ffff:7f00:1', 'ff02::1']) {
      expect(isForbiddenAddress(a), a).toBe(true);
    }
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8']) {
      expect(isForbiddenAddress(a), a).toBe(false);
    }
    expect(checkWebhookUrl('https://Example.COM/a?b=1', outboundRules({ NODE_ENV: 'production', SVC_ALLOW_PRIVATE_URLS: false }, false))).toBe('https://example.com/a?b=1');
  });

  it('refuses a host name that resolves to a loopback address', async () => {
    const err = await new Promise<unknown>((resolve) => guardedLookup('localhost', { all: true }, (e) => resolve(e)));
    expect(err).toBeInstanceOf(Error);
    // The refusal names no address (it would map the internal network).
    expect(String((err as Error).message)).toBe('refused: the host is not a public address');
  });
});
