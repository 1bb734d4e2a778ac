import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, newBuyer, publishedMerchant, signPayment } from './helpers/agent.js';
import { hostRequest, type HostResponse } from './helpers/agent-protocol.js';
import { jsonOrText, TestApp } from './helpers/harness.js';
import { mailsTo, signInLinkOf, startSmtp, type Smtp } from './helpers/smtp.js';

/**
 * Issue 24.1: every absolute URL the service hands out (mail links, verification_url,
 * review_url, next, manifest URLs, x402 resource.url) comes from configuration
 * (SVC_PUBLIC_BASE_URL, the discovery domain, a merchant's stored domain), never from the
 * request's Host header. In production, as the attacker ran it, with real SMTP mail.
 */
let app: TestApp;
let smtp: Smtp;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
const EVIL = ['evil.example', 'evil.example:443'];

beforeAll(async () => {
  smtp = await startSmtp();
  app = await TestApp.start({ NODE_ENV: 'production', SVC_SMTP_URL: smtp.url });
  // Unknown agents are `cautious`, below `standard`: a settle is held, so it carries review_url.
  shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null }, products: [{ sku: 'coffee', amount: '4.50' }] });
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
});

const cookieOf = (res: { headers: Headers }) => /svc_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
const paymentRequiredHeader = (res: HostResponse) => JSON.parse(Buffer.from(String(res.headers['payment-required']), 'base64').toString('utf8'));

/** A request whose target is in absolute form (`GET http://evil.example/... HTTP/1.1`), as a proxy would receive it. */
function absoluteFormRequest(target: string, host: string): Promise<HostResponse> {
  const url = new URL(app.baseUrl);
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname: url.hostname, port: url.port, method: 'GET', path: target, headers: { host } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: jsonOrText(text) });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

describe('absolute URLs come from configuration, never from Host (issue 24.1)', () => {
  it('GIVEN Host: evil.example (with and without :443) WHEN a sign-in link is asked for THEN the mailed link is on SVC_PUBLIC_BASE_URL, and a cookie write whose Origin matches that Host is still refused', async () => {
    for (const host of EVIL) {
      const victim = `victim-${host.replace(/\W/g, '-')}-${Date.now()}@example.com`;
      const asked = await hostRequest(app, 'POST', '/v1/auth/email/start', host, { body: { email: victim } });
      expect(asked.status, asked.text).toBe(200);
      expect(asked.text).not.toContain('evil.example');
      await expect.poll(() => mailsTo(smtp, victim).length, { timeout: 15_000 }).toBe(1);
      const mail = mailsTo(smtp, victim)[0]!;
      expect(mail).not.toContain('evil.example');
      const link = signInLinkOf(mail);
      expect(link.startsWith(`${app.baseUrl}/v1/auth/verify?token=`), link).toBe(true);

      // The link works where it points; the session it opens is not fooled by a Host-derived origin either.
      const page = await hostRequest(app, 'GET', new URL(link).pathname + new URL(link).search, host);
      expect(page.status).toBe(200);
      expect(page.text).not.toContain('evil.example');
      const token = new URL(link).searchParams.get('token')!;
      const signedIn = await app.request('POST', '/v1/auth/verify', {
        rawBody: new URLSearchParams({ token }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', origin: app.baseUrl },
      });
      expect(signedIn.status, signedIn.text).toBe(303);
      const cookie = cookieOf(signedIn)!;
      const forged = await hostRequest(app, 'POST', '/v1/auth/logout', host, { headers: { cookie: `svc_session=${cookie}`, origin: `http://${host}` } });
      expect(forged.status, forged.text).toBe(403);
      expect(forged.body.reason_codes).toEqual(['CSRF_REJECTED']);
    }
  });

  it('GIVEN Host: evil.example WHEN a CLI login starts THEN verification_url is the configured device page', async () => {
    for (const host of EVIL) {
      const started = await hostRequest(app, 'POST', '/v1/auth/cli/start', host, { body: {} });
      expect(started.status, started.text).toBe(200);
      expect(started.body.verification_url).toBe(`${app.baseUrl}/dashboard/device`);
      expect(started.text).not.toContain('evil.example');
    }
  });

  it('GIVEN Host: evil.example WHEN an agent reads the manifest, opens a checkout and is held THEN next, the manifest URLs and review_url never name it', async () => {
    for (const host of EVIL) {
      const manifest = await hostRequest(app, 'GET', `/m/${shop.merchant.slug}/.well-known/agentic-checkout.json`, host);
      expect(manifest.status, manifest.text).toBe(200);
      expect(manifest.text).not.toContain('evil.example');

      const created = await hostRequest(app, 'POST', `${shop.base}/agent/checkout`, host, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }] } });
      expect(created.status, created.text).toBe(201);
      expect(created.text).not.toContain('evil.example');
      const payment = await signPayment(newBuyer(), created.body.payment_required);
      const held = await hostRequest(app, 'POST', `${shop.base}/agent/checkout/${created.body.session_id}/settle`, host, { body: payment });
      expect(held.status, held.text).toBe(202);
      expect(held.body.review_url).toBe(`${app.baseUrl}/dashboard/test/holds/${created.body.session_id}`);
      expect(held.body.next).toBe(`GET ${shop.base}/agent/checkout/${created.body.session_id}`);
      expect(held.text).not.toContain('evil.example');
    }
  });

  it('GIVEN Host: evil.example, a discovery host with a foreign port, or an absolute-form target WHEN a paid resource answers 402 THEN resource.url is the configured origin with the path asked for', async () => {
    for (const host of EVIL) {
      const res = await hostRequest(app, 'GET', `${shop.base}/x402/coffee?qty=2`, host);
      expect(res.status, res.text).toBe(402);
      expect(paymentRequiredHeader(res).resource.url).toBe(`${app.baseUrl}${shop.base}/x402/coffee?qty=2`);
      expect(res.body.accepts[0].resource).toBe(`${app.baseUrl}${shop.base}/x402/coffee?qty=2`);
      expect(res.text).not.toContain('evil.example');
    }
    const absolute = await absoluteFormRequest(`http://evil.example${shop.base}/x402/coffee`, 'evil.example');
    expect(absolute.status, absolute.text).toBe(402);
    expect(paymentRequiredHeader(absolute).resource.url).toBe(`${app.baseUrl}${shop.base}/x402/coffee`);

    // The discovery host: the configured discovery domain with the scheme and port of SVC_PUBLIC_BASE_URL, whatever port the Host header names.
    const port = new URL(app.baseUrl).port;
    const discovery = await hostRequest(app, 'GET', '/x402/coffee', `${shop.merchant.slug}.svc.localhost:443`);
    expect(discovery.status, discovery.text).toBe(402);
    expect(paymentRequiredHeader(discovery).resource.url).toBe(`http://${shop.merchant.slug}.svc.localhost:${port}/x402/coffee`);
    // A Host that is neither names no merchant.
    const unknown = await hostRequest(app, 'GET', '/x402/coffee', 'evil.example');
    expect(unknown.status).toBe(404);
    expect(unknown.body.reason_codes).toEqual(['NOT_FOUND']);
  });
});
