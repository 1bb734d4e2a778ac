import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { configVersion, expectError, racePastRowLock, sql } from './helpers/foundation.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

type Shop = { key: TestKey; merchantId: string };

async function shop(overrides: Record<string, unknown> = {}): Promise<Shop> {
  const key = await app.key('test');
  const res = await app.request('POST', '/v1/merchants', { key, body: merchantBody(overrides) });
  expect(res.status, res.text).toBe(201);
  return { key, merchantId: res.body.id };
}

/** sha256 hex of the RFC 8785 form, computed independently of the server. */
const jcsHash = (value: unknown) => createHash('sha256').update(canonicalize(value)!).digest('hex');

/** decisions.md "Policy": every MerchantPolicy field with its default (null = no limit). */
const DEFAULTS: Record<string, unknown> = {
  requireMandateOverUsd: 20,
  minReputationTier: 'standard',
  maxPerTransactionUsd: 500,
  maxPerAgentPerDayUsd: null,
  ratePerAgentPerHour: null,
  ratePerAgentPerDay: null,
  blockedAgents: [],
  allowedRails: null,
  forbiddenIntentKeywords: [],
  requiredIntentMatch: false,
  holdForReviewBelowTier: 'cautious',
};
/** The normalized body the hash covers: absent fields take their default; list and flag fields read null as empty/false. */
function normalized(body: Record<string, unknown>) {
  const out: Record<string, unknown> = { ...DEFAULTS, ...body };
  for (const k of ['blockedAgents', 'forbiddenIntentKeywords', 'requiredIntentMatch']) if (out[k] === null) out[k] = DEFAULTS[k];
  return out;
}
/** The policy hash of a valid MerchantPolicy body. */
const policyHash = (body: Record<string, unknown>) => jcsHash(normalized(body));

async function put(s: Shop, body: unknown, note?: string) {
  const res = await app.request('PUT', '/v1/policy', { key: s.key, body: { body, ...(note !== undefined ? { note } : {}) } });
  expect(res.status, res.text).toBe(201);
  return res.body as { id: string; version: number; hash: string; active: false };
}

async function activeRows(merchantId: string) {
  return sql<{ version: number }>(app, 'select version from policy_versions where merchant_id = ? and active order by version', [merchantId]);
}

describe('GET and PUT /v1/policy', () => {
  it('GIVEN no published policy WHEN GET /v1/policy THEN the documented empty shape', async () => {
    const s = await shop();
    const res = await app.request('GET', '/v1/policy', { key: s.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ active: null, version: 0, body: null, hash: null });
    // A stored but unpublished version does not change that.
    await put(s, { maxPerTransactionUsd: 10 });
    expect((await app.request('GET', '/v1/policy', { key: s.key })).body).toEqual({ active: null, version: 0, body: null, hash: null });
  });

  it('GIVEN successive PUTs WHEN stored THEN 201 {id, version, hash, active:false} with version max+1', async () => {
    const s = await shop();
    const a = await put(s, { maxPerTransactionUsd: 100 }, 'first');
    expect(Object.keys(a).sort()).toEqual(['active', 'hash', 'id', 'version']);
    expect(a).toEqual({ id: expect.stringMatching(/^pol_[0-9a-z]{26}$/), version: 1, hash: policyHash({ maxPerTransactionUsd: 100 }), active: false });
    const b = await put(s, { maxPerTransactionUsd: 200 });
    expect(b.version).toBe(2);
    expect(b.id).not.toBe(a.id);
    // Versions are per merchant.
    const other = await shop();
    expect((await put(other, {})).version).toBe(1);
    const rows = await sql(app, 'select version, note, active from policy_versions where merchant_id = ? order by version', [s.merchantId]);
    expect(rows.map((r) => [Number(r.version), r.note, r.active])).toEqual([[1, 'first', false], [2, null, false]]);
  });

  it('GIVEN a PUT whose body is missing or not an object WHEN sent THEN 400 VALIDATION_FAILED naming body', async () => {
    const s = await shop();
    const bad: unknown[] = [{}, { body: [] }, { body: [1, 2] }, { body: 'strict' }, { body: null }, { body: 5 }, { body: true }];
    for (const payload of bad) {
      const res = await app.request('PUT', '/v1/policy', { key: s.key, body: payload });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, JSON.stringify(payload)).toContain('body');
    }
    expectError(await app.request('PUT', '/v1/policy', { key: s.key, body: { body: {}, note: 7 } }), 400, 'VALIDATION_FAILED');
    expectError(await app.request('PUT', '/v1/policy', { key: s.key, body: { body: {}, version: 9 } }), 400, 'VALIDATION_FAILED');
    const rows = await sql(app, 'select count(*)::int as n from policy_versions where merchant_id = ?', [s.merchantId]);
    expect(Number(rows[0]!.n)).toBe(0);
  });

  it('GIVEN a project with no merchant WHEN using policy routes THEN 404 NOT_FOUND', async () => {
    const key = await app.key('test');
    expectError(await app.request('GET', '/v1/policy', { key }), 404, 'NOT_FOUND');
    expectError(await app.request('PUT', '/v1/policy', { key, body: { body: {} } }), 404, 'NOT_FOUND');
    expectError(await app.request('POST', '/v1/validate', { key }), 404, 'NOT_FOUND');
    expectError(await app.request('POST', '/v1/publish', { key }), 404, 'NOT_FOUND');
  });
});

describe('policy hash', () => {
  it('GIVEN a body WHEN stored THEN the hash is sha256 of the RFC 8785 canonical JSON of the normalized body', async () => {
    const s = await shop();
    const stored = await put(s, { maxPerTransactionUsd: 100 });
    // Spelled out: every field with its default, keys in JCS (UTF-16) order.
    const canonical =
      '{"allowedRails":null,"blockedAgents":[],"forbiddenIntentKeywords":[],"holdForReviewBelowTier":"cautious",' +
      '"maxPerAgentPerDayUsd":null,"maxPerTransactionUsd":100,"minReputationTier":"standard","ratePerAgentPerDay":null,' +
      '"ratePerAgentPerHour":null,"requireMandateOverUsd":20,"requiredIntentMatch":false}';
    expect(canonicalize(normalized({ maxPerTransactionUsd: 100 }))).toBe(canonical);
    expect(stored.hash).toBe(createHash('sha256').update(canonical).digest('hex'));
  });

  it('GIVEN bodies that differ only in key order, number spelling or spelled-out defaults WHEN stored THEN they hash the same', async () => {
    const s = await shop();
    const body = { minReputationTier: 'trusted', maxPerTransactionUsd: 250.5, allowedRails: ['x402', 'mock'], blockedAgents: ['é', 'z'], requireMandateOverUsd: null };
    const reordered = { requireMandateOverUsd: null, blockedAgents: ['é', 'z'], allowedRails: ['x402', 'mock'], maxPerTransactionUsd: 250.5, minReputationTier: 'trusted' };
    const a = await put(s, body);
    expect(a.hash).toMatch(/^[0-9a-f]{64}$/);
    expect(a.hash).toBe(policyHash(body));
    expect((await put(s, reordered)).hash).toBe(a.hash);
    // Spelling out a default, or leaving it out, is the same policy.
    expect((await put(s, { ...body, holdForReviewBelowTier: 'cautious', forbiddenIntentKeywords: [] })).hash).toBe(a.hash);
    expect((await put(s, {})).hash).toBe((await put(s, { ...DEFAULTS })).hash);
    // 1e2 and 100 are one number (JCS serializes it once).
    const spelled = await app.request('PUT', '/v1/policy', { key: s.key, rawBody: '{"body":{"maxPerTransactionUsd":1e2}}' });
    expect(spelled.status, spelled.text).toBe(201);
    expect(spelled.body.hash).toBe(policyHash({ maxPerTransactionUsd: 100 }));
    // Array order and values are significant.
    expect((await put(s, { ...body, allowedRails: ['mock', 'x402'] })).hash).not.toBe(a.hash);
    expect((await put(s, { ...body, maxPerTransactionUsd: 250.25 })).hash).not.toBe(a.hash);
    expect((await put(s, { ...body, requireMandateOverUsd: 20 })).hash).not.toBe(a.hash); // null (no limit) is not the default 20
  });

  it('GIVEN a body that is not a valid MerchantPolicy WHEN stored THEN it hashes as sent (it cannot be published)', async () => {
    const s = await shop();
    const bad = { maxPerTransactionUsd: 'lots', extra: { b: 1, a: 2 } };
    expect((await put(s, bad)).hash).toBe(jcsHash(bad));
  });

  it('GIVEN a published policy WHEN read back THEN the body is as stored and re-hashes to the stored hash (jsonb round trip)', async () => {
    const s = await shop();
    const body = { maxPerTransactionUsd: 99.99, minReputationTier: 'trusted', forbiddenIntentKeywords: ['gift card', 'crypto'], requiredIntentMatch: false };
    const stored = await put(s, body);
    expect((await app.request('POST', '/v1/publish', { key: s.key })).status).toBe(200);
    const got = await app.request('GET', '/v1/policy', { key: s.key });
    expect(got.body).toEqual({ id: stored.id, version: 1, body, hash: stored.hash, active: true, note: null, created_at: expect.any(String) });
    expect(policyHash(got.body.body)).toBe(got.body.hash);
  });
});

describe('POST /v1/validate', () => {
  it('GIVEN a valid draft WHEN validated THEN 200 {ok:true, findings:[]}', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 100, allowedRails: ['x402'] });
    await app.request('POST', '/v1/catalog', { key: s.key, body: { sku: 'A', name: 'A', price: { amount: '1', currency: 'USD' } } });
    const res = await app.request('POST', '/v1/validate', { key: s.key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ok: true, findings: [] });
  });

  it('GIVEN drafts with problems WHEN validated THEN 200 {ok:false} with a finding per problem', async () => {
    const cases: Array<[string, (s: Shop) => Promise<void>, string]> = [
      ['unknown field', async (s) => void (await put(s, { maxPerTransactionUsd: 5, surpriseField: true })), 'surpriseField'],
      ['wrong type', async (s) => void (await put(s, { maxPerTransactionUsd: '100' })), 'maxPerTransactionUsd'],
      ['bad enum', async (s) => void (await put(s, { minReputationTier: 'platinum' })), 'minReputationTier'],
      [
        'EUR item',
        async (s) => {
          const r = await app.request('POST', '/v1/catalog', { key: s.key, body: { sku: 'E-1', name: 'Euro thing', price: { amount: '3.00', currency: 'EUR' } } });
          expect(r.status).toBe(201);
        },
        'E-1',
      ],
      [
        'no rail',
        async (s) => {
          const r = await app.request('PATCH', `/v1/merchants/${s.merchantId}`, { key: s.key, body: { rails: ['card'] } });
          expect(r.status).toBe(200);
        },
        'card',
      ],
    ];
    const codes: Record<string, string> = {
      'unknown field': 'POLICY_FIELD_UNKNOWN',
      'wrong type': 'POLICY_FIELD_INVALID',
      'bad enum': 'POLICY_FIELD_INVALID',
      'EUR item': 'CATALOG_CURRENCY_UNSETTLEABLE',
      'no rail': 'RECEIVING_NO_RAIL_ENABLED',
    };
    for (const [name, arrange, mention] of cases) {
      const s = await shop();
      await arrange(s);
      const res = await app.request('POST', '/v1/validate', { key: s.key });
      expect(res.status, name).toBe(200);
      expect(res.body.ok, name).toBe(false);
      expect(res.body.findings.map((f: { code: string }) => f.code), name).toEqual([codes[name]]);
      expect(res.body.findings[0].human, name).toContain(mention);
      expect(Object.keys(res.body.findings[0]).sort()).toEqual(['code', 'human', 'severity']);
      expect(res.body.findings[0].severity, name).toBe('error');
    }
  });

  it('GIVEN a USD-only catalog on a card merchant WHEN validated THEN a card rail settles any currency', async () => {
    const s = await shop({ rails: ['card'], receiving: { card: { processor: 'stripe', accountId: 'acct_1' } } });
    await app.request('POST', '/v1/catalog', { key: s.key, body: { sku: 'E', name: 'E', price: { amount: '3.00', currency: 'EUR' } } });
    expect((await app.request('POST', '/v1/validate', { key: s.key })).body).toEqual({ ok: true, findings: [] });
  });

  it('GIVEN any draft WHEN validated THEN nothing changes: no activation, no config bump', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 1 });
    expect((await app.request('POST', '/v1/publish', { key: s.key })).status).toBe(200);
    await put(s, { maxPerTransactionUsd: 2 });
    const before = {
      v: await configVersion(app, s.merchantId),
      rows: await sql(app, 'select id, version, active, activated_at from policy_versions where merchant_id = ? order by version', [s.merchantId]),
      policy: (await app.request('GET', '/v1/policy', { key: s.key })).body,
      merchant: await sql(app, 'select published_at, updated_at from merchants where id = ?', [s.merchantId]),
    };
    for (let i = 0; i < 3; i++) expect((await app.request('POST', '/v1/validate', { key: s.key })).body.ok).toBe(true);
    expect(await configVersion(app, s.merchantId)).toBe(before.v);
    expect(await sql(app, 'select id, version, active, activated_at from policy_versions where merchant_id = ? order by version', [s.merchantId])).toEqual(before.rows);
    expect((await app.request('GET', '/v1/policy', { key: s.key })).body).toEqual(before.policy);
    expect(await sql(app, 'select published_at, updated_at from merchants where id = ?', [s.merchantId])).toEqual(before.merchant);
  });
});

describe('POST /v1/publish', () => {
  it('GIVEN a valid draft WHEN published THEN 200 with the version and it becomes the active policy', async () => {
    const s = await shop();
    const v1 = await put(s, { maxPerTransactionUsd: 100 });
    const res = await app.request('POST', '/v1/publish', { key: s.key });
    expect(res.status, res.text).toBe(200);
    expect(res.body).toEqual({ published: true, ok: true, active_policy_version: 1 });
    const got = await app.request('GET', '/v1/policy', { key: s.key });
    expect(got.body).toMatchObject({ id: v1.id, version: 1, hash: v1.hash, active: true, body: { maxPerTransactionUsd: 100 } });
  });

  it('GIVEN an active newest version WHEN published again THEN the same version, still the only active one', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 100 });
    expect((await app.request('POST', '/v1/publish', { key: s.key })).body.active_policy_version).toBe(1);
    const again = await app.request('POST', '/v1/publish', { key: s.key });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ published: true, ok: true, active_policy_version: 1 });
    expect((await activeRows(s.merchantId)).map((r) => Number(r.version))).toEqual([1]);
  });

  it('GIVEN a newer version WHEN published THEN it is active and the previous one is not', async () => {
    const s = await shop();
    const v1 = await put(s, { maxPerTransactionUsd: 100 });
    await app.request('POST', '/v1/publish', { key: s.key });
    const v2 = await put(s, { maxPerTransactionUsd: 200 });
    // Until published, the old version stays in force.
    expect((await app.request('GET', '/v1/policy', { key: s.key })).body.id).toBe(v1.id);
    expect((await app.request('POST', '/v1/publish', { key: s.key })).body.active_policy_version).toBe(2);
    expect((await app.request('GET', '/v1/policy', { key: s.key })).body).toMatchObject({ id: v2.id, version: 2, hash: v2.hash });
    const rows = await sql(app, 'select version, active, activated_at from policy_versions where merchant_id = ? order by version', [s.merchantId]);
    expect(rows.map((r) => [Number(r.version), r.active])).toEqual([[1, false], [2, true]]);
    expect(rows[1]!.activated_at).not.toBeNull();
  });

  it('GIVEN an invalid draft WHEN published THEN 422 with findings, CONFIG_INVALID, and the previous policy stays active', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 100 });
    expect((await app.request('POST', '/v1/publish', { key: s.key })).status).toBe(200);
    const v = await configVersion(app, s.merchantId);
    await put(s, { maxPerTransactionUsd: 'lots', nonsense: 1 });
    const res = await app.request('POST', '/v1/publish', { key: s.key });
    expect(res.status, res.text).toBe(422);
    expect(Object.keys(res.body).sort()).toEqual(['error_human', 'findings', 'ok', 'published', 'reason_codes']);
    expect(res.body).toMatchObject({ published: false, ok: false, reason_codes: ['CONFIG_INVALID'] });
    expect(res.body.findings.map((f: { code: string }) => f.code).sort()).toEqual(['POLICY_FIELD_INVALID', 'POLICY_FIELD_UNKNOWN']);
    expect(typeof res.body.error_human).toBe('string');
    expect(res.body.error_human).not.toContain('\n');
    // The same findings as validate.
    const validated = await app.request('POST', '/v1/validate', { key: s.key });
    expect(validated.body).toEqual({ ok: false, findings: res.body.findings });
    expect((await activeRows(s.merchantId)).map((r) => Number(r.version))).toEqual([1]);
    expect(await configVersion(app, s.merchantId)).toBe(v);
  });

  it('GIVEN a merchant without any policy version WHEN published THEN 200 with version 0 and no active policy', async () => {
    const s = await shop();
    const res = await app.request('POST', '/v1/publish', { key: s.key });
    expect(res.body).toEqual({ published: true, ok: true, active_policy_version: 0 });
    expect((await app.request('GET', '/v1/policy', { key: s.key })).body).toEqual({ active: null, version: 0, body: null, hash: null });
  });

  it('GIVEN a publish WHEN it succeeds THEN merchants.config_version increases (also on a re-publish)', async () => {
    const s = await shop();
    await put(s, {});
    const v0 = await configVersion(app, s.merchantId);
    await app.request('POST', '/v1/publish', { key: s.key });
    const v1 = await configVersion(app, s.merchantId);
    expect(v1).toBeGreaterThan(v0);
    await app.request('POST', '/v1/publish', { key: s.key });
    expect(await configVersion(app, s.merchantId)).toBeGreaterThan(v1);
    // A PUT alone does not (the new version is not in force yet).
    const v2 = await configVersion(app, s.merchantId);
    await put(s, { maxPerTransactionUsd: 3 });
    expect(await configVersion(app, s.merchantId)).toBe(v2);
  });

  it('GIVEN a config change committed while a publish waits for the merchant lock WHEN it proceeds THEN it validates the committed config', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 5 });
    // rails = card while receiving has only x402 and mock: nothing can settle.
    const res = await racePastRowLock(app, `update merchants set rails = '["card"]'::jsonb where id = ?`, s.merchantId, () =>
      app.request('POST', '/v1/publish', { key: s.key }),
    );
    expect(res.status, res.text).toBe(422);
    expect(res.body.findings.map((f: { code: string }) => f.code)).toEqual(['RECEIVING_NO_RAIL_ENABLED']);
    expect(await activeRows(s.merchantId)).toEqual([]);
  });

  it('GIVEN 20 concurrent publishes interleaved with PUTs WHEN they all finish THEN exactly one version is active and versions are gapless', async () => {
    const s = await shop();
    await put(s, { maxPerTransactionUsd: 0 });
    const calls: Array<Promise<{ status: number; body: any; text: string }>> = [];
    for (let i = 0; i < 20; i++) {
      calls.push(app.request('POST', '/v1/publish', { key: s.key }));
      if (i % 2 === 0) calls.push(app.request('PUT', '/v1/policy', { key: s.key, body: { body: { maxPerTransactionUsd: i + 1 } } }));
    }
    const results = await Promise.all(calls);
    const publishes = results.filter((r) => 'published' in (r.body ?? {}));
    const puts = results.filter((r) => r.status === 201);
    expect(publishes).toHaveLength(20);
    for (const r of publishes) expect(r.status, r.text).toBe(200);
    expect(puts).toHaveLength(10);
    expect(puts.map((r) => r.body.version).sort((a: number, b: number) => a - b)).toEqual(Array.from({ length: 10 }, (_, i) => i + 2));

    const active = await activeRows(s.merchantId);
    expect(active).toHaveLength(1);
    const all = await sql(app, 'select version from policy_versions where merchant_id = ? order by version', [s.merchantId]);
    expect(all.map((r) => Number(r.version))).toEqual(Array.from({ length: 11 }, (_, i) => i + 1));
    // Every publish reported a version that existed; the active one is among them.
    const reported = new Set(publishes.map((r) => r.body.active_policy_version));
    expect(reported.has(Number(active[0]!.version))).toBe(true);
    // A final publish activates the newest, still exactly one.
    expect((await app.request('POST', '/v1/publish', { key: s.key })).body.active_policy_version).toBe(11);
    expect((await activeRows(s.merchantId)).map((r) => Number(r.version))).toEqual([11]);
  });
});
