import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestApp, type TestKey } from './helpers/harness.js';
import { agentId, publishedMerchant } from './helpers/agent.js';
import { createEndpoint } from './helpers/webhooks.js';
import { onPostgres } from './helpers/foundation.js';

const TOKEN = 'metrics-token-0123456789abcdef';

async function scrape(app: TestApp, token?: string) {
  const res = await fetch(`${app.baseUrl}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });
  return { status: res.status, type: res.headers.get('content-type'), text: await res.text(), headers: res.headers };
}

/** The value of one sample, e.g. `svc_settle_outcomes_total{outcome="accepted",code="NONE"}` (labels in any order). */
function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    const m = /^([a-z_:]+)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const have = Object.fromEntries([...(m[2] ?? '').matchAll(/([a-z_]+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => have[k] === v)) return Number(m[3]);
  }
  return undefined;
}

let app: TestApp;
let key: TestKey;

beforeAll(async () => {
  app = await TestApp.start({ SVC_METRICS_TOKEN: TOKEN });
  key = await app.key('test');
});
afterAll(async () => app?.stop());

describe('GET /metrics', () => {
  it('GIVEN SVC_METRICS_TOKEN WHEN scraped without it or with another token THEN 401 UNAUTHENTICATED; with it THEN Prometheus text', async () => {
    const none = await scrape(app);
    expect(none.status).toBe(401);
    expect(JSON.parse(none.text)).toMatchObject({ reason_codes: ['UNAUTHENTICATED'] });
    expect(none.headers.get('www-authenticate')).toContain('Bearer');
    expect((await scrape(app, `${TOKEN}x`)).status).toBe(401);
    expect((await scrape(app, key.secret)).status).toBe(401);
    const ok = await scrape(app, TOKEN);
    expect(ok.status).toBe(200);
    expect(ok.type).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(ok.text).toContain('# TYPE svc_http_requests_total counter');
    expect(ok.text).toContain('# TYPE process_cpu_user_seconds_total counter');
  });

  it('GIVEN requests to routes with ids WHEN scraped THEN requests and latency are counted by route template and status, never by raw path', async () => {
    const missing = 'mrch_01m7yx83k5m851kpknd198yact';
    expect((await app.request('GET', `/v1/merchants/${missing}`, { key })).status).toBe(404);
    expect((await app.request('GET', `/v1/merchants/${missing}`, { key })).status).toBe(404);
    expect((await app.request('GET', '/no/such/route', { skipOpenApiCheck: true })).status).toBe(404);
    const { text } = await scrape(app, TOKEN);
    expect(sample(text, 'svc_http_requests_total', { method: 'GET', route: '/v1/merchants/:id', status: '404' })).toBe(2);
    expect(sample(text, 'svc_http_request_duration_seconds_count', { method: 'GET', route: '/v1/merchants/:id', status: '404' })).toBe(2);
    expect(sample(text, 'svc_http_requests_total', { method: 'GET', route: '<unmatched>', status: '404' })).toBe(1);
    expect(sample(text, 'svc_http_requests_total', { method: 'GET', route: '/metrics', status: '401' })).toBeGreaterThanOrEqual(3);
    expect(text).not.toContain(missing);
    expect(text).not.toContain('/no/such/route');
  });

  it('GIVEN a mock purchase, a refused settle and a webhook endpoint WHEN scraped THEN settle outcomes by code, settlement attempts by state, the webhook queue and the pool are reported', async () => {
    const shop = await publishedMerchant(app, { key, policy: { allowedRails: ['x402', 'mock'] } });
    await createEndpoint(app, key, 'http://127.0.0.1:9/hooks', ['order.settled']);
    const open = async (rail = 'mock') => {
      const s = await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }], rail } });
      expect(s.status, s.text).toBe(201);
      return s.body.session_id as string;
    };
    const paid = await app.request('POST', `${shop.base}/agent/checkout/${await open()}/settle`, { body: { payment: { mock: true } } });
    expect(paid.status, paid.text).toBe(200);
    // A mock payment on an x402 session: 402 payment_invalid PAYMENT_SCHEME_UNSUPPORTED.
    const wrong = await app.request('POST', `${shop.base}/agent/checkout/${await open('x402')}/settle`, { body: { payment: { mock: true } } });
    expect(wrong.status, wrong.text).toBe(402);
    const unknown = await app.request('POST', `${shop.base}/agent/checkout/sess_01m7yx83k5m851kpknd198yact/settle`, { body: { payment: { mock: true } } });
    expect(unknown.status).toBe(404);

    const { text } = await scrape(app, TOKEN);
    expect(sample(text, 'svc_settle_outcomes_total', { outcome: 'accepted', code: 'NONE' })).toBe(1);
    expect(sample(text, 'svc_settle_outcomes_total', { outcome: 'error', code: 'SESSION_NOT_FOUND' })).toBe(1);
    expect(sample(text, 'svc_settle_outcomes_total', { outcome: 'payment_invalid', code: 'PAYMENT_SCHEME_UNSUPPORTED' })).toBe(1);
    expect(sample(text, 'svc_settlement_attempts', { state: 'settled' })).toBe(1);
    expect(sample(text, 'svc_settlement_attempts', { state: 'pending' })).toBe(0);
    // No worker runs in the harness: order.settled waits in the queue, due now.
    expect(sample(text, 'svc_webhook_queue_depth', { due: 'now' })).toBe(1);
    expect(sample(text, 'svc_webhook_oldest_due_age_seconds')).toBeGreaterThanOrEqual(0);
    await new Promise((r) => setTimeout(r, 1100));
    expect(sample((await scrape(app, TOKEN)).text, 'svc_webhook_oldest_due_age_seconds')).toBeGreaterThanOrEqual(1);
    if (onPostgres) {
      expect(sample(text, 'svc_db_pool_connections', { state: 'max' })).toBe(app.target.kind === 'postgres' ? app.target.poolMax : NaN);
      expect(sample(text, 'svc_db_pool_connections', { state: 'total' })).toBeGreaterThanOrEqual(1);
    } else {
      expect(sample(text, 'svc_db_pool_connections', { state: 'total' })).toBe(1);
    }
  });

  it('GIVEN two apps in one process THEN each has its own registry (no shared counters, no duplicate registration)', async () => {
    const other = await TestApp.start({ SVC_METRICS_TOKEN: TOKEN });
    try {
      const { text } = await scrape(other, TOKEN);
      expect(sample(text, 'svc_http_requests_total', { method: 'GET', route: '/v1/merchants/:id', status: '404' })).toBeUndefined();
    } finally {
      await other.stop();
    }
  });

  it('GIVEN no SVC_METRICS_TOKEN THEN /metrics is open in development and absent (404) in production', async () => {
    const dev = await TestApp.start({ NODE_ENV: 'development' });
    const prod = await TestApp.start({ NODE_ENV: 'production' });
    try {
      expect((await scrape(dev)).status).toBe(200);
      const hidden = await scrape(prod);
      expect(hidden.status).toBe(404);
      expect(JSON.parse(hidden.text)).toMatchObject({ reason_codes: ['NOT_FOUND'] });
    } finally {
      await dev.stop();
      await prod.stop();
    }
  });
});
