import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError } from './helpers/foundation.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

/** GET /v1/policy/versions: every stored version, newest first, active or not, as put. */
let app: TestApp;
let key: TestKey;
let merchantId: string;
let secondId: string;
/** The versions as PUT answered them, in order (version 1 first). */
const put: Array<{ id: string; version: number; hash: string; body: Record<string, unknown>; note: string | null }> = [];

async function putVersion(mid: string, body: Record<string, unknown>, note?: string) {
  const res = await app.request('PUT', `/v1/policy?merchant_id=${mid}`, { key, body: { body, ...(note !== undefined ? { note } : {}) } });
  expect(res.status, res.text).toBe(201);
  return { ...(res.body as { id: string; version: number; hash: string }), body, note: note ?? null };
}

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  merchantId = (await app.request('POST', '/v1/merchants', { key, body: merchantBody() })).body.id;
  secondId = (await app.request('POST', '/v1/merchants', { key, body: merchantBody() })).body.id;
  put.push(await putVersion(merchantId, { maxPerTransactionUsd: 100 }, 'first'));
  put.push(await putVersion(merchantId, { maxPerTransactionUsd: 250, allowedRails: ['mock'] }));
  // Published: version 2 becomes the active one.
  expect((await app.request('POST', `/v1/publish?merchant_id=${merchantId}`, { key })).status).toBe(200);
  // Stored but never publishable: an unknown field is kept as put.
  put.push(await putVersion(merchantId, { maxPerTransactionUsd: 300, surprise: true }, 'draft with a typo'));
  await putVersion(secondId, { maxPerTransactionUsd: 5 });
});
afterAll(async () => app?.stop());

describe('GET /v1/policy/versions', () => {
  it('GIVEN three stored versions, the second active WHEN listed THEN all three newest first with id, version, hash, active, body, note and created_at', async () => {
    const res = await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}`, { key });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({
      data: [...put].reverse().map((p) => ({
        id: p.id,
        version: p.version,
        hash: p.hash,
        active: p.version === 2,
        body: p.body,
        note: p.note,
        created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      })),
      has_more: false,
      next_cursor: null,
    });
    expect(res.body.data.map((v: any) => v.version)).toEqual([3, 2, 1]);
    // The active one is the one GET /v1/policy answers.
    const active = await app.request('GET', `/v1/policy?merchant_id=${merchantId}`, { key });
    expect(res.body.data.find((v: any) => v.active)).toEqual({ ...active.body });
  });

  it('GIVEN no merchant_id WHEN listed THEN the default merchant (the first of the mode); another merchant\'s versions are its own', async () => {
    const def = await app.request('GET', '/v1/policy/versions', { key });
    expect(def.body.data.map((v: any) => v.id)).toEqual([...put].reverse().map((p) => p.id));
    const second = await app.request('GET', `/v1/policy/versions?merchant_id=${secondId}`, { key });
    expect(second.body.data).toEqual([expect.objectContaining({ version: 1, active: false, body: { maxPerTransactionUsd: 5 }, note: null })]);
  });

  it('GIVEN limit=1 WHEN walked with next_cursor THEN every version once, newest first', async () => {
    const walked: number[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}&limit=1${cursor ? `&cursor=${cursor}` : ''}`, { key });
      expect(page.status, page.text).toBe(200);
      walked.push(...page.body.data.map((v: any) => v.version));
      cursor = page.body.next_cursor;
      expect(page.body.has_more).toBe(cursor !== null);
    } while (cursor);
    expect(walked).toEqual([3, 2, 1]);
  });

  it('GIVEN a foreign cursor, a bad limit or an unknown field WHEN listed THEN 400 VALIDATION_FAILED; another project\'s merchant is 404; policy:read is required', async () => {
    const otherMerchantVersion = (await app.request('GET', `/v1/policy/versions?merchant_id=${secondId}`, { key })).body.data[0].id;
    for (const q of [`cursor=${otherMerchantVersion}`, 'cursor=ord_01', 'limit=0', 'limit=101', 'surprise=1']) {
      expectError(await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}&${q}`, { key }), 400, 'VALIDATION_FAILED');
    }
    const stranger = await app.key('test');
    expectError(await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}`, { key: stranger }), 404, 'NOT_FOUND');
    const live = await app.key('live', { projectId: key.projectId });
    expectError(await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}`, { key: live }), 404, 'NOT_FOUND');
    const noScope = await app.key('test', { projectId: key.projectId, scopes: ['orders:read'] });
    expectError(await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}`, { key: noScope }), 403, 'INSUFFICIENT_SCOPE');
    const reader = await app.key('test', { projectId: key.projectId, scopes: ['policy:read'] });
    expect((await app.request('GET', `/v1/policy/versions?merchant_id=${merchantId}`, { key: reader })).status).toBe(200);
  });
});
