import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestApp } from './helpers/harness.js';
import { expectError, sql } from './helpers/foundation.js';
import { createEndpoint } from './helpers/webhooks.js';

const EP = '/v1/webhooks/endpoints';
let app: TestApp;

beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

describe('hardening: webhook endpoint races (issue 9.3, 9.4)', () => {
  it('GIVEN two concurrent rotate-secret calls WHEN both answer 200 THEN both answered secrets still sign (current and previous), in every round', async () => {
    const key = await app.key('test');
    const { id } = await createEndpoint(app, key, 'https://example.com/rot');
    for (let round = 0; round < 8; round++) {
      const [a, b] = await Promise.all([
        app.request('POST', `${EP}/${id}/rotate-secret`, { key }),
        app.request('POST', `${EP}/${id}/rotate-secret`, { key }),
      ]);
      expect(a.status, a.text).toBe(200);
      expect(b.status, b.text).toBe(200);
      expect(a.body.secret).not.toBe(b.body.secret);
      const [row] = await sql(app, 'select secret_sealed, previous_secret_sealed from webhook_endpoints where id = ?', [id]);
      const signing = [app.services.box.open(row!.secret_sealed, id), app.services.box.open(row!.previous_secret_sealed, id)].sort();
      expect(signing, `round ${round}`).toEqual([a.body.secret, b.body.secret].sort());
    }
  });

  it('GIVEN 40 concurrent creates on an empty project WHEN they race THEN exactly 16 succeed and the rest are 422 WEBHOOK_ENDPOINT_LIMIT', async () => {
    const key = await app.key('test');
    const results = await Promise.all(
      Array.from({ length: 40 }, (_, i) => app.request('POST', EP, { key, body: { url: `https://example.com/c${i}`, enabled_events: ['*'] } })),
    );
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(16);
    for (const r of results.filter((x) => x.status !== 201)) expectError(r, 422, 'WEBHOOK_ENDPOINT_LIMIT');
    const [count] = await sql(app, 'select count(*)::int as n from webhook_endpoints where project_id = ? and deleted_at is null', [key.projectId]);
    expect(count!.n).toBe(16);
  });
});
