import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { contract } from '@svc/contract';
import { TestApp, type TestKey } from './helpers/harness.js';
import { expectError } from './helpers/foundation.js';
import { publishedMerchant } from './helpers/agent.js';

type Route = { method: string; path: string };

function routesOf(router: Record<string, unknown>): Route[] {
  const out: Route[] = [];
  for (const v of Object.values(router)) {
    const r = v as { method?: string; path?: string };
    if (typeof r.method === 'string' && typeof r.path === 'string') out.push({ method: r.method, path: r.path });
    else out.push(...routesOf(v as Record<string, unknown>));
  }
  return out;
}

let app: TestApp;
let key: TestKey;
let slug: string;

beforeAll(async () => {
  app = await TestApp.start();
  const shop = await publishedMerchant(app, { products: [{ sku: 'coffee', amount: '4.50' }] });
  key = shop.key;
  slug = shop.merchant.slug;
});
afterAll(async () => app?.stop());

const BAD = ['%00', 'a%00b', '%0a', '%1f', '%7f'];

describe('hardening: control characters in ids, refs and query values (issue 9.6)', () => {
  it('GIVEN the agent routes of a real merchant WHEN the merchant ref or the session id holds NUL THEN 404, never 503', async () => {
    for (const bad of BAD) {
      expectError(await app.request('GET', `/m/${bad}/agent/catalog`), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/m/${bad}/.well-known/agentic-checkout.json`), 404, 'NOT_FOUND');
      expectError(await app.request('GET', `/m/${slug}/agent/checkout/${bad}`), 404, 'NOT_FOUND');
      expectError(await app.request('POST', `/m/${slug}/agent/checkout/${bad}/settle`, { body: { payment: { mock: true } } }), 404, 'NOT_FOUND');
    }
    // The merchant itself still answers.
    expect((await app.request('GET', `/m/${slug}/agent/catalog`)).status).toBe(200);
  });

  it('GIVEN every contract route with path parameters WHEN a parameter holds NUL THEN 404 NOT_FOUND in the error shape', async () => {
    const withParams = routesOf(contract as unknown as Record<string, unknown>).filter((r) => r.path.includes('/:'));
    expect(withParams.length).toBeGreaterThan(5);
    for (const r of withParams) {
      const params = [...r.path.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!);
      for (const target of params) {
        const path = r.path.replace(/:([A-Za-z_]+)/g, (_, name: string) => (name === target ? '%00' : name === 'merchant' ? slug : 'x'));
        const res = await app.request(r.method, path, { key, body: r.method === 'GET' || r.method === 'DELETE' ? undefined : {} });
        expect(res.status, `${r.method} ${path}: ${res.text}`).toBe(404);
        expectError(res, 404, 'NOT_FOUND');
      }
    }
  });

  it('GIVEN NUL in a query value or key WHEN listing THEN 400 VALIDATION_FAILED naming the parameter, never 503', async () => {
    const cases: Array<[string, string]> = [
      ['/v1/webhooks/endpoints?cursor=%00', 'query.cursor'],
      ['/v1/events?cursor=abc%00', 'query.cursor'],
      ['/v1/orders?cursor=%00', 'query.cursor'],
      ['/v1/catalog?merchant_id=%00', 'query.merchant_id'],
      ['/v1/orders?merchant_id=mrch_%00', 'query.merchant_id'],
      [`/m/${slug}/agent/catalog?cursor=%00`, 'query.cursor'],
      ['/v1/merchants?x%00=1', 'query.x'],
    ];
    for (const [path, field] of cases) {
      const res = await app.request('GET', path, { key });
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, path).toContain(field);
    }
  });
});
