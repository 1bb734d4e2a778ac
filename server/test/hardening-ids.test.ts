import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorShape, merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
let key: TestKey;
let foreignMerchantId: string;
beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  expect((await app.request('POST', '/v1/merchants', { key, body: merchantBody() })).status).toBe(201);
  const other = await app.key('test');
  foreignMerchantId = (await app.request('POST', '/v1/merchants', { key: other, body: merchantBody() })).body.id;
});
afterAll(async () => {
  await app?.stop();
});

/** Ids that cannot exist: wrong prefix, wrong length, the wrong kind of id, and a very long one. */
const IMPOSSIBLE = ['mrch_nosuch', 'nosuch', 'sess_01', 'x'.repeat(300), 'whk_' + 'z'.repeat(40)];

function expect404(res: { status: number; body: unknown; text: string }, what: string) {
  expect(res.status, `${what}: ${res.text}`).toBe(404);
  expectErrorShape(res.body);
  expect(res.body.reason_codes).toEqual(['NOT_FOUND']);
}

describe('ids that cannot exist are 404 like ids that do not', () => {
  it('GIVEN a malformed or foreign merchant_id query WHEN any merchant-scoped route is called THEN 404 NOT_FOUND, never 400', async () => {
    for (const id of [...IMPOSSIBLE, foreignMerchantId, '']) {
      const q = `merchant_id=${encodeURIComponent(id)}`;
      expect404(await app.request('GET', `/v1/catalog?${q}`, { key }), `catalog ${id}`);
      expect404(await app.request('GET', `/v1/receiving?${q}`, { key }), `receiving ${id}`);
      expect404(await app.request('GET', `/v1/policy?${q}`, { key }), `policy ${id}`);
      expect404(await app.request('GET', `/v1/orders?${q}`, { key }), `orders ${id}`);
      expect404(await app.request('DELETE', `/v1/catalog/SKU-1?${q}`, { key }), `catalog item ${id}`);
    }
  });

  it('GIVEN a malformed path id WHEN merchants, catalog items, sessions, webhook endpoints or events are addressed THEN 404 NOT_FOUND', async () => {
    for (const raw of [...IMPOSSIBLE, foreignMerchantId]) {
      const id = encodeURIComponent(raw);
      expect404(await app.request('GET', `/v1/merchants/${id}`, { key }), `merchant ${raw}`);
      expect404(await app.request('PATCH', `/v1/merchants/${id}`, { key, body: { name: 'x' } }), `patch merchant ${raw}`);
      // The merchant JWKS is public, so only ids that cannot exist are checked there.
      if (raw !== foreignMerchantId) expect404(await app.request('GET', `/v1/merchants/${id}/jwks`), `jwks ${raw}`);
      expect404(await app.request('PATCH', `/v1/catalog/${id}`, { key, body: { name: 'x' } }), `patch catalog ${raw}`);
      expect404(await app.request('GET', `/v1/sessions/${id}`, { key }), `session ${raw}`);
      expect404(await app.request('POST', `/v1/sessions/${id}/approve`, { key, body: {} }), `approve ${raw}`);
      expect404(await app.request('GET', `/v1/webhooks/endpoints/${id}`, { key }), `endpoint ${raw}`);
      expect404(await app.request('DELETE', `/v1/webhooks/endpoints/${id}`, { key }), `delete endpoint ${raw}`);
      expect404(await app.request('POST', `/v1/webhooks/endpoints/${id}/rotate-secret`, { key, body: {} }), `rotate ${raw}`);
      expect404(await app.request('GET', `/v1/events/${id}`, { key }), `event ${raw}`);
      expect404(await app.request('POST', `/v1/events/${id}/replay`, { key, body: {} }), `replay ${raw}`);
    }
  });
});
