import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { checkOutboundUrl, guardedLookupWith, isForbiddenAddress, outboundRules, type Resolver } from '../src/lib/ssrf.js';
import { ISSUER_UNAVAILABLE_HUMAN, verifyMandate, type MandateContext } from '../src/modules/gate/mandate.js';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { MandateIssuer, openSession, payX402 } from './helpers/agent-protocol.js';
import { expectErrorShape, merchantBody, TestApp, type TestKey } from './helpers/harness.js';

/** The rules a live merchant gets, and a test merchant's outside production (the app here runs NODE_ENV=test). */
const LIVE_RULES = outboundRules({ NODE_ENV: 'test', SVC_ALLOW_PRIVATE_URLS: false }, true);
const TEST_RULES = outboundRules({ NODE_ENV: 'test', SVC_ALLOW_PRIVATE_URLS: false }, false);

const LIVE_PAY_TO = '0x2222222222222222222222222222222222222222';
const liveReceiving = { x402: { chain: 'base', address: LIVE_PAY_TO } };

let app: TestApp;
let live: TestKey;
let test: TestKey;
let issuer: MandateIssuer;
/** A local server counting the requests it gets: the SSRF target. */
let target: http.Server;
let targetHits = 0;
let targetUrl: string;
beforeAll(async () => {
  app = await TestApp.start();
  live = await app.key('live');
  test = await app.key('test');
  issuer = await MandateIssuer.start();
  target = http.createServer((_req, res) => {
    targetHits += 1;
    res.statusCode = 404;
    res.end('<html>internal admin</html>');
  });
  await new Promise<void>((resolve) => target.listen(0, '127.0.0.1', () => resolve()));
  targetUrl = `http://127.0.0.1:${(target.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await app?.stop();
  await issuer?.stop();
  target?.closeAllConnections();
  await new Promise<void>((resolve) => target?.close(() => resolve()));
});

/** A DNS answer of our choosing: a public-looking name pointing wherever the test says. */
const resolveTo =
  (address: string, family: 4 | 6 = 4): Resolver =>
  (_host, cb) =>
    cb(null, [{ address, family }]);

const EMBEDDED_PRIVATE = [
  '::7f00:1', // IPv4-compatible 127.0.0.1
  '::127.0.0.1',
  '::a9fe:a9fe', // IPv4-compatible 169.254.169.254
  '::ffff:7f00:1', // IPv4-mapped
  '::ffff:169.254.169.254',
  '2002:7f00:1::1', // 6to4 of 127.0.0.1
  '2002:a00:1::', // 6to4 of 10.0.0.1
  '2002:a9fe:a9fe::1', // 6to4 of 169.254.169.254
  '64:ff9b::a00:1', // NAT64 of 10.0.0.1
  '64:ff9b::7f00:1',
  '2001:0:7f00:1::1', // Teredo, server 127.0.0.1
  '2001:0:808:808:0:0:f5ff:fffe', // Teredo, client 10.0.0.1 (obfuscated)
  'fe80::1%eth0',
];

describe('outbound address rules (webhooks and issuer JWKS)', () => {
  it('GIVEN IPv6 addresses embedding a private or loopback IPv4 WHEN classified THEN forbidden; public ones stay allowed', () => {
    for (const a of EMBEDDED_PRIVATE) expect(isForbiddenAddress(a), a).toBe(true);
    for (const a of ['8.8.8.8', '2606:4700:4700::1111', '::ffff:8.8.8.8', '2002:808:808::1', '2001:0:808:808::f7f7:f7f7']) {
      expect(isForbiddenAddress(a), a).toBe(false);
    }
  });

  it('GIVEN live webhook URLs with a trailing-dot local name or an IPv6 literal embedding loopback WHEN registered THEN 400 WEBHOOK_URL_INVALID', async () => {
    for (const url of [
      'https://localhost./h',
      'https://localhost../h',
      'https://api.localhost./h',
      'https://printer.local./h',
      'https://intranet./h',
      'https://[::7f00:1]/h',
      'https://[::127.0.0.1]/h',
      'https://[2002:7f00:1::1]/h',
      'https://[2002:c0a8:101::1]/h',
      'https://[64:ff9b::a9fe:a9fe]/h',
      'https://[2001:0:7f00:1::1]/h',
      'https://[::ffff:a9fe:a9fe]/h',
    ]) {
      const res = await app.request('POST', '/v1/webhooks/endpoints', { key: live, body: { url, enabled_events: ['*'] } });
      expect(res.status, `${url}: ${res.text}`).toBe(400);
      expectErrorShape(res.body);
      expect(res.body.reason_codes).toEqual(['WEBHOOK_URL_INVALID']);
    }
    const ok = await app.request('POST', '/v1/webhooks/endpoints', { key: live, body: { url: 'https://hooks.example.com./h', enabled_events: ['*'] } });
    expect(ok.status, ok.text).toBe(201);
  });

  it('GIVEN a live name that resolves to an embedded-loopback IPv6 WHEN connecting THEN the guarded lookup refuses it', async () => {
    for (const a of ['2002:7f00:1::1', '::7f00:1', '::ffff:127.0.0.1']) {
      const err = await new Promise<unknown>((resolve) => guardedLookupWith(resolveTo(a, 6))('hooks.example.com', { all: true }, (e) => resolve(e)));
      expect(String((err as Error)?.message), a).toBe('refused: the host is not a public address');
    }
  });
});

describe('trusted_svc_jwks_url', () => {
  it('GIVEN a live merchant WHEN trusted_svc_jwks_url is http, loopback, link-local, private or embeds one THEN create and PATCH answer 400 naming the field', async () => {
    const bad = [
      'http://169.254.169.254/latest/meta-data/',
      'http://issuer.example.com/jwks',
      'https://169.254.169.254/jwks',
      'https://127.0.0.1/jwks',
      'https://10.1.2.3/jwks',
      'https://localhost./jwks',
      'https://[::ffff:a9fe:a9fe]/jwks',
      'https://[2002:7f00:1::1]/jwks',
      `${targetUrl}/jwks`,
    ];
    const created = await app.request('POST', '/v1/merchants', { key: live, body: merchantBody({ receiving: liveReceiving }) });
    expect(created.status, created.text).toBe(201);
    for (const url of bad) {
      const c = await app.request('POST', '/v1/merchants', { key: live, body: merchantBody({ receiving: liveReceiving, trusted_svc_jwks_url: url }) });
      expect(c.status, `${url}: ${c.text}`).toBe(400);
      expectErrorShape(c.body);
      expect(c.body.error_human).toMatch(/^trusted_svc_jwks_url: /);
      const p = await app.request('PATCH', `/v1/merchants/${created.body.id}`, { key: live, body: { trusted_svc_jwks_url: url } });
      expect(p.status, `${url}: ${p.text}`).toBe(400);
    }
    const good = await app.request('PATCH', `/v1/merchants/${created.body.id}`, { key: live, body: { trusted_svc_jwks_url: 'https://wallet.example.com/.well-known/jwks.json' } });
    expect(good.status, good.text).toBe(200);
  });

  it('GIVEN a test merchant WHEN trusted_svc_jwks_url is http to loopback THEN accepted, http elsewhere refused (the webhook test-mode rule)', async () => {
    const ok = await app.request('POST', '/v1/merchants', { key: test, body: merchantBody({ trusted_svc_jwks_url: `${targetUrl}/jwks` }) });
    expect(ok.status, ok.text).toBe(201);
    const bad = await app.request('POST', '/v1/merchants', { key: test, body: merchantBody({ trusted_svc_jwks_url: 'http://169.254.169.254/latest' }) });
    expect(bad.status, bad.text).toBe(400);
  });

  it('GIVEN a live issuer name whose DNS answer is private, or a live row holding a loopback URL WHEN a mandate is verified THEN MANDATE_ISSUER_UNAVAILABLE and nothing is fetched', async () => {
    const token = await issuer.sign({ iss: 'x', sub: `mnd_${ulid()}`, exp: Math.floor(Date.now() / 1000) + 60, decision: 'approve', agent_id: 'a', authorization: {} });
    const ctx: MandateContext = { jwksUrl: null, merchantId: 'mrch_x', merchantDomain: 'x.example', total: '1.00', currency: 'USD', agentId: 'a', now: new Date(), rules: LIVE_RULES, timeoutMs: 300 };
    const port = (target.address() as AddressInfo).port;
    const before = targetHits;
    const cases: Array<Partial<MandateContext>> = [
      // A DNS answer pointing to loopback (the target listens there).
      { jwksUrl: `https://issuer-${ulid().toLowerCase()}.example.com:${port}/jwks`, resolve: resolveTo('127.0.0.1') },
      { jwksUrl: `https://issuer-${ulid().toLowerCase()}.example.com:${port}/jwks`, resolve: resolveTo('2002:7f00:1::1', 6) },
      // A test merchant's name pointing to a private address.
      { jwksUrl: `https://issuer-${ulid().toLowerCase()}.example.com:${port}/jwks`, rules: TEST_RULES, resolve: resolveTo('10.0.0.7') },
      // A row written before the rule: a live merchant holding a loopback or metadata URL.
      { jwksUrl: `${targetUrl}/jwks` },
      { jwksUrl: `https://127.0.0.1:${port}/jwks` },
    ];
    for (const c of cases) {
      const r = await verifyMandate({ type: 'svc', token }, { ...ctx, ...c });
      expect(r, JSON.stringify(c)).toMatchObject({ ok: false, code: 'MANDATE_ISSUER_UNAVAILABLE', human: ISSUER_UNAVAILABLE_HUMAN });
    }
    expect(targetHits).toBe(before);
    // The same loopback URL on a test merchant is fetched (test mode keeps local issuers).
    const r = await verifyMandate({ type: 'svc', token }, { ...ctx, jwksUrl: `${targetUrl}/jwks-${ulid()}`, rules: TEST_RULES });
    expect(r.code).toBe('MANDATE_ISSUER_UNAVAILABLE');
    expect(targetHits).toBe(before + 1);
  });

  it('GIVEN issuer URLs on a closed port, an open port answering 404 and one streaming a huge body WHEN an agent settles THEN the same generic MANDATE_ISSUER_UNAVAILABLE text each time', async () => {
    const huge = http.createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.write('{"keys":[');
      const chunk = '{"kty":"OKP","crv":"Ed25519","x":"' + 'A'.repeat(4000) + '"},';
      let sent = 0;
      const pump = () => {
        while (sent < 100 && res.write(chunk)) sent += 1;
        if (sent < 100) res.once('drain', pump);
        else res.end('{}]}');
      };
      pump();
    });
    await new Promise<void>((resolve) => huge.listen(0, '127.0.0.1', () => resolve()));
    const closed = await MandateIssuer.start();
    const closedUrl = closed.url;
    await closed.stop();
    const humans: string[] = [];
    try {
      for (const url of [closedUrl, `${targetUrl}/jwks`, `http://127.0.0.1:${(huge.address() as AddressInfo).port}/jwks`]) {
        const m = await publishedMerchant(app, { merchant: { trusted_svc_jwks_url: url }, policy: { requireMandateOverUsd: 5, holdForReviewBelowTier: null } });
        const agent = agentId();
        const token = await issuer.sign({
          iss: 'https://wallet.example',
          sub: `mnd_${ulid().toLowerCase()}`,
          exp: Math.floor(Date.now() / 1000) + 600,
          decision: 'approve',
          agent_id: agent,
          authorization: { merchant: m.merchant.id, max_amount: '20.00', currency: 'USD', intent: null },
        });
        const s = await openSession(app, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent, mandate: { type: 'svc', token } });
        const { res } = await payX402(app, m.base, s, newBuyer());
        expect(res.status, res.text).toBe(403);
        expect(res.body.reason_codes).toEqual(['MANDATE_ISSUER_UNAVAILABLE']);
        humans.push(res.body.error_human);
      }
    } finally {
      huge.closeAllConnections();
      await new Promise<void>((resolve) => huge.close(() => resolve()));
    }
    expect(new Set(humans).size, humans.join(' | ')).toBe(1);
    expect(humans[0]).toBe(ISSUER_UNAVAILABLE_HUMAN);
  });
});

it('checkOutboundUrl keeps test-mode http to loopback and refuses it live', () => {
  expect(checkOutboundUrl('http://127.0.0.1:9/x', TEST_RULES).ok).toBe(true);
  expect(checkOutboundUrl('http://localhost:9/x', TEST_RULES).ok).toBe(true);
  expect(checkOutboundUrl('http://127.0.0.1:9/x', LIVE_RULES).ok).toBe(false);
});
