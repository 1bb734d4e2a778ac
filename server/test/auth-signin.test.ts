import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pino from 'pino';
import { expectError, sql } from './helpers/foundation.js';
import { merchantBody, TestApp } from './helpers/harness.js';
import { mailsTo, signInLinkOf, startSmtp, type Smtp } from './helpers/smtp.js';

let app: TestApp;
let smtp: Smtp;
const logLines: string[] = [];

beforeAll(async () => {
  smtp = await startSmtp();
  const sink = new Writable({
    write(chunk, _enc, cb) {
      logLines.push(chunk.toString());
      cb();
    },
  });
  // Debug level: everything the service would log, captured to check that no secret is in it.
  app = await TestApp.start({ SVC_SMTP_URL: smtp.url }, { log: pino({ level: 'debug' }, sink) });
});
afterAll(async () => {
  await app?.stop();
  await smtp?.close();
});

/** Moves the service clock into a fresh 15-minute rate-limit window for each test. */
let windowOffset = 0;
function freshWindow() {
  windowOffset += 1;
  const base = Math.ceil(Date.now() / 900_000) * 900_000 + windowOffset * 900_000 * 3;
  app.services.now = () => new Date(base + 1000);
  return base + 1000;
}

const start = (body: Record<string, unknown>) => app.request('POST', '/v1/auth/email/start', { body });
const cookieOf = (res: { headers: Headers }) => /svc_session=([^;]+)/.exec(res.headers.get('set-cookie') ?? '')?.[1];
const withCookie = (cookie: string, extra: Record<string, string> = {}) => ({ cookie: `svc_session=${cookie}`, ...extra });

/** The button of the link's page: the form POST a browser sends from it (same-origin). */
const confirm = (token: string | undefined, headers: Record<string, string> = { 'sec-fetch-site': 'same-origin' }) =>
  app.request('POST', '/v1/auth/verify', {
    rawBody: token === undefined ? '' : new URLSearchParams({ token }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
  });

async function signIn(email: string) {
  const started = await start({ email });
  expect(started.status, started.text).toBe(200);
  const opened = await app.request('GET', `/v1/auth/verify?token=${encodeURIComponent(started.body.dev_token)}`);
  expect(opened.status, opened.text).toBe(200);
  const verified = await confirm(started.body.dev_token);
  expect(verified.status, verified.text).toBe(303);
  const cookie = cookieOf(verified);
  expect(cookie).toBeTruthy();
  return { cookie: cookie!, started, verified };
}

describe('magic link', () => {
  it('GIVEN an email WHEN the link is followed THEN an account exists, a session cookie is set, and /v1/me answers for the member', async () => {
    freshWindow();
    const email = `ada-${Date.now()}@example.com`;
    const started = await start({ email });
    expect(started.status, started.text).toBe(200);
    expect(started.body).toMatchObject({ ok: true, expires_in: 900 });
    expect(started.body.verify_url).toBe(`${app.baseUrl}/v1/auth/verify?token=${started.body.dev_token}`);
    // The same link went out over SMTP.
    await expect.poll(() => smtp.messages.some((m) => m.includes(started.body.dev_token))).toBe(true);

    // The link opens a page and spends nothing; its button signs in.
    const opened = await app.request('GET', `/v1/auth/verify?token=${started.body.dev_token}`);
    expect(opened.status).toBe(200);
    expect(opened.headers.get('content-type')).toMatch(/^text\/html/);
    expect(opened.headers.get('set-cookie')).toBeNull();
    expect(opened.text).toContain(`Signing in as <strong>${email}</strong>`);
    expect(opened.text).toContain(`<form method="post" action="/v1/auth/verify"><input type="hidden" name="token" value="${started.body.dev_token}">`);
    for (const res of [opened]) {
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('referrer-policy')).toBe('same-origin');
      expect(res.headers.get('x-frame-options')).toBe('DENY');
      expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    }
    const verified = await confirm(started.body.dev_token);
    expect(verified.status).toBe(303);
    expect(verified.headers.get('location')).toBe('/dashboard/');
    const setCookie = verified.headers.get('set-cookie')!;
    expect(setCookie).toMatch(/^svc_session=[A-Za-z0-9_-]{43};/);
    expect(setCookie).toMatch(/HttpOnly/);
    expect(setCookie).toMatch(/SameSite=Lax/);
    expect(setCookie).toMatch(/Secure/);
    expect(verified.headers.get('cache-control')).toBe('no-store');

    const cookie = cookieOf(verified)!;
    const me = await app.request('GET', '/v1/me', { headers: withCookie(cookie) });
    expect(me.status, me.text).toBe(200);
    expect(me.body).toMatchObject({ key: null, user: { email }, livemode: false });
    expect(me.body.project.id).toMatch(/^proj_/);

    // A later sign-in (another letter case) lands in the same account and project.
    const again = await signIn(email.toUpperCase());
    const me2 = await app.request('GET', '/v1/me', { headers: withCookie(again.cookie) });
    expect(me2.body.user.id).toBe(me.body.user.id);
    expect(me2.body.project.id).toBe(me.body.project.id);
  });

  it('GIVEN a link WHEN it is used twice or after 15 minutes THEN 410 with a page that says so', async () => {
    const t0 = freshWindow();
    const first = await start({ email: `reuse-${Date.now()}@example.com` });
    expect((await confirm(first.body.dev_token)).status).toBe(303);
    for (const reused of [await app.request('GET', `/v1/auth/verify?token=${first.body.dev_token}`), await confirm(first.body.dev_token)]) {
      expect(reused.status).toBe(410);
      expect(reused.headers.get('content-type')).toMatch(/^text\/html/);
      expect(reused.text).toContain('expired');
      expect(reused.headers.get('set-cookie')).toBeNull();
    }

    const late = await start({ email: `late-${Date.now()}@example.com` });
    app.services.now = () => new Date(t0 + 900_000 + 1000);
    expect((await app.request('GET', `/v1/auth/verify?token=${late.body.dev_token}`)).status).toBe(410);
    expect((await confirm(late.body.dev_token)).status).toBe(410);
    expect((await app.request('GET', '/v1/auth/verify?token=nonsense')).status).toBe(410);
    expect((await confirm('nonsense')).status).toBe(410);
    expect((await app.request('GET', '/v1/auth/verify')).status).toBe(410);
    expect((await confirm(undefined)).status).toBe(410);
  });

  it('GIVEN a mail scanner that fetches every link WHEN it opens the link, even many times THEN nothing is spent and the person still signs in with it', async () => {
    freshWindow();
    const email = `scanned-${Date.now()}@example.com`;
    const started = await start({ email });
    // what Safe Links and mail gateways do: GET (and HEAD) the link before the person clicks
    for (let i = 0; i < 3; i++) expect((await app.request('GET', `/v1/auth/verify?token=${started.body.dev_token}`)).status).toBe(200);
    const head = await fetch(`${app.baseUrl}/v1/auth/verify?token=${started.body.dev_token}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(await sql(app, 'select used_at from sign_in_tokens where email = ?', [email])).toEqual([{ used_at: null }]);
    expect(await sql(app, 'select count(*)::int as n from users where email = ?', [email])).toEqual([{ n: 0 }]);
    const verified = await confirm(started.body.dev_token);
    expect(verified.status, verified.text).toBe(303);
    expect(cookieOf(verified)).toBeTruthy();
  });

  it('GIVEN a token posted from another origin WHEN the browser says so (Origin, else Sec-Fetch-Site) THEN 403, nothing is spent, and the link still works from its own page', async () => {
    freshWindow();
    const started = await start({ email: `csrf-${Date.now()}@example.com` });
    const token = started.body.dev_token as string;
    const foreign: Record<string, string>[] = [{ 'sec-fetch-site': 'cross-site' }, { 'sec-fetch-site': 'same-site' }, { origin: 'https://evil.example' }, { origin: 'null' }, {}];
    for (const headers of foreign) {
      const refused = await confirm(token, headers);
      expect(refused.status, JSON.stringify(headers)).toBe(403);
      expect(refused.headers.get('content-type')).toMatch(/^text\/html/);
      expect(refused.headers.get('set-cookie')).toBeNull();
    }
    expect(await sql(app, 'select used_at from sign_in_tokens where token_hash = encode(sha256(convert_to(?, \'utf8\')), \'hex\')', [token])).toEqual([{ used_at: null }]);
    // The link's page: a same-origin form POST (its Referrer-Policy same-origin keeps the real Origin).
    expect((await confirm(token, { 'sec-fetch-site': 'same-origin', origin: app.baseUrl })).status).toBe(303);
    const again = await start({ email: `csrf2-${Date.now()}@example.com` });
    expect((await confirm(again.body.dev_token, { origin: app.baseUrl })).status).toBe(303);
  });

  it('GIVEN a known and an unknown email WHEN a link is asked for THEN the answers have the same shape (no enumeration); a malformed email is 400', async () => {
    freshWindow();
    const known = `known-${Date.now()}@example.com`;
    await signIn(known);
    const a = await start({ email: known });
    const b = await start({ email: `nobody-${Date.now()}@example.com` });
    expect(a.status).toBe(200);
    expect(b.status).toBe(200);
    expect(Object.keys(a.body).sort()).toEqual(Object.keys(b.body).sort());
    expectError(await start({ email: 'not-an-email' }), 400, 'VALIDATION_FAILED');
    expectError(await start({ email: 'a@b.co', extra: 1 }), 400, 'VALIDATION_FAILED');
  });

  it('GIVEN NODE_ENV=production WHEN a link is asked for THEN neither the link nor the token is in the answer', async () => {
    const prod = await TestApp.start({ NODE_ENV: 'production', SVC_SMTP_URL: smtp.url });
    try {
      const res = await prod.request('POST', '/v1/auth/email/start', { body: { email: 'prod@example.com' } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ ok: true, expires_in: 900 });
    } finally {
      await prod.stop();
    }
  });
});

describe('sessions', () => {
  it('GIVEN a bad, a logged-out or an expired session cookie THEN 401 INVALID_SESSION; no credentials at all is 401 UNAUTHENTICATED', async () => {
    const t0 = freshWindow();
    expectError(await app.request('GET', '/v1/me', { headers: withCookie('x'.repeat(43)) }), 401, 'INVALID_SESSION');
    expectError(await app.request('GET', '/v1/me'), 401, 'UNAUTHENTICATED');

    const { cookie } = await signIn(`logout-${Date.now()}@example.com`);
    const out = await app.request('POST', '/v1/auth/logout', { headers: withCookie(cookie, { origin: app.baseUrl }) });
    expect(out.status, out.text).toBe(200);
    expect(out.headers.get('set-cookie')).toMatch(/svc_session=;/);
    expectError(await app.request('GET', '/v1/me', { headers: withCookie(cookie) }), 401, 'INVALID_SESSION');

    const { cookie: later } = await signIn(`expiry-${Date.now()}@example.com`);
    expect((await app.request('GET', '/v1/me', { headers: withCookie(later) })).status).toBe(200);
    app.services.now = () => new Date(t0 + app.config.SVC_USER_SESSION_TTL_SECONDS * 1000 + 5000);
    expectError(await app.request('GET', '/v1/me', { headers: withCookie(later) }), 401, 'INVALID_SESSION');
  });

  it('GIVEN a session cookie WHEN a write comes from another origin THEN 403 CSRF_REJECTED; from this origin it works; API keys work from anywhere', async () => {
    freshWindow();
    const { cookie } = await signIn(`csrf-${Date.now()}@example.com`);
    const body = merchantBody();
    expectError(await app.request('POST', '/v1/merchants', { headers: withCookie(cookie, { origin: 'https://evil.example' }), body }), 403, 'CSRF_REJECTED');
    expectError(await app.request('POST', '/v1/merchants', { headers: withCookie(cookie), body }), 403, 'CSRF_REJECTED');
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(0);
    const sameSite = await app.request('POST', '/v1/merchants', { headers: withCookie(cookie, { 'sec-fetch-site': 'same-origin' }), body: merchantBody() });
    expect(sameSite.status, sameSite.text).toBe(201);
    const ok = await app.request('POST', '/v1/merchants', { headers: withCookie(cookie, { origin: app.baseUrl }), body: merchantBody() });
    expect(ok.status, ok.text).toBe(201);
    // Reads need no Origin.
    expect((await app.request('GET', '/v1/merchants', { headers: withCookie(cookie) })).status).toBe(200);

    const key = await app.key('test');
    expect((await app.request('POST', '/v1/merchants', { key, headers: { origin: 'https://evil.example' }, body: merchantBody() })).status).toBe(201);
  });

  it('GIVEN a signed-in member WHEN minting keys THEN both modes are allowed, and Svc-Mode selects the mode of what is listed', async () => {
    freshWindow();
    const { cookie } = await signIn(`both-${Date.now()}@example.com`);
    const h = withCookie(cookie, { origin: app.baseUrl });
    const live = await app.request('POST', '/v1/keys', { headers: h, body: { mode: 'live', name: 'prod server' } });
    expect(live.status, live.text).toBe(201);
    expect(live.body.secret).toMatch(/^svc_live_/);
    const test = await app.request('POST', '/v1/keys', { headers: h, body: { mode: 'test' } });
    expect(test.body.secret).toMatch(/^svc_test_/);
    const liveList = await app.request('GET', '/v1/keys', { headers: { ...h, 'svc-mode': 'live' } });
    expect(liveList.body.data.map((k: any) => k.id)).toEqual([live.body.id]);
    const testList = await app.request('GET', '/v1/keys', { headers: h });
    expect(testList.body.data.map((k: any) => k.id)).toEqual([test.body.id]);
    const me = await app.request('GET', '/v1/me', { key: live.body.secret });
    expect(me.body.livemode).toBe(true);
    expectError(await app.request('GET', '/v1/keys', { headers: { ...h, 'svc-mode': 'staging' } }), 400, 'VALIDATION_FAILED');
  });
});

describe('device code (RFC 8628)', () => {
  it('GIVEN a CLI login WHEN the person signs in by the mailed link carrying the device code and types the code THEN the link alone approves nothing; the poll is pending, slow_down when too fast, then ready once, then 410', async () => {
    let now = freshWindow();
    const startRes = await app.request('POST', '/v1/auth/cli/start', { body: {} });
    expect(startRes.status, startRes.text).toBe(200);
    const dc = startRes.body;
    expect(Object.keys(dc).sort()).toEqual(['device_code', 'expires_in', 'interval', 'user_code', 'verification_url']);
    expect(dc).toMatchObject({ interval: 5, expires_in: 900, verification_url: `${app.baseUrl}/dashboard/device` });
    expect(dc.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    const poll = () => app.request('POST', '/v1/auth/cli/poll', { body: { device_code: dc.device_code } });

    expect((await poll()).body).toEqual({ status: 'pending' });
    const tooFast = await poll();
    expectError(tooFast, 429, 'SLOW_DOWN');
    expect(tooFast.headers.get('retry-after')).toBe('10');

    const email = `cli-${Date.now()}@example.com`;
    const started = await start({ email, device_code: dc.device_code });
    expect(started.status, started.text).toBe(200);
    const opened = await app.request('GET', `/v1/auth/verify?token=${started.body.dev_token}`);
    expect(opened.text).toContain('A command-line sign-in (svc login) asked for this link');
    expect(opened.text).not.toContain(dc.user_code);
    const verified = await confirm(started.body.dev_token);
    expect(verified.status).toBe(303);
    expect(verified.headers.get('location')).toBe('/dashboard/device');
    // signing in approved nothing
    now += 11_000;
    app.services.now = () => new Date(now);
    expect((await poll()).body).toEqual({ status: 'pending' });

    // On the device page the person types the code their terminal shows.
    const approved = await app.request('POST', '/v1/auth/cli/approve', { headers: withCookie(cookieOf(verified)!, { origin: app.baseUrl }), body: { user_code: dc.user_code } });
    expect(approved.status, approved.text).toBe(200);
    now += 16_000;
    app.services.now = () => new Date(now);
    const ready = await poll();
    expect(ready.status, ready.text).toBe(200);
    expect(ready.body.status).toBe('ready');
    expect(ready.body.api_key).toMatchObject({ mode: 'test', name: 'CLI login', restricted: false });
    const me = await app.request('GET', '/v1/me', { key: ready.body.api_key.secret });
    expect(me.body.project.id).toBe((await app.request('GET', '/v1/me', { headers: withCookie(cookieOf(verified)!) })).body.project.id);

    now += 21_000;
    app.services.now = () => new Date(now);
    expectError(await poll(), 410, 'DEVICE_CODE_EXPIRED');
  });

  it("GIVEN an anonymous attacker with a CLI login WHEN they ask for a sign-in link to the victim's inbox with their device code and the victim follows the genuine mail THEN the victim is only signed in to their own account: neither the mail nor the pages name the attacker's code and the attacker's poll never gets a key (issue 24.5)", async () => {
    const prod = await TestApp.start({ NODE_ENV: 'production', SVC_SMTP_URL: smtp.url });
    try {
      let now = Date.now();
      prod.services.now = () => new Date(now);
      // The attacker, signed in nowhere.
      const attacker = (await prod.request('POST', '/v1/auth/cli/start', { body: {} })).body;
      const victim = `victim-${Date.now()}@example.com`;
      const asked = await prod.request('POST', '/v1/auth/email/start', { body: { email: victim, device_code: attacker.device_code } });
      expect(asked.status, asked.text).toBe(200);
      expect(asked.body).toEqual({ ok: true, expires_in: 900 });

      // The victim receives the genuine mail, opens its link and presses the button.
      await expect.poll(() => mailsTo(smtp, victim).length, { timeout: 15_000 }).toBe(1);
      const mail = mailsTo(smtp, victim)[0]!;
      const link = signInLinkOf(mail);
      const page = await fetch(link);
      const pageText = await page.text();
      expect(page.status).toBe(200);
      const token = new URL(link).searchParams.get('token')!;
      const signedIn = await prod.request('POST', '/v1/auth/verify', {
        rawBody: new URLSearchParams({ token }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
      });
      expect(signedIn.status).toBe(303);
      expect(cookieOf(signedIn)).toBeTruthy();

      // The attacker polls: never a key.
      for (let i = 0; i < 3; i++) {
        now += 6_000;
        const polled = await prod.request('POST', '/v1/auth/cli/poll', { body: { device_code: attacker.device_code } });
        expect(polled.status, polled.text).toBe(200);
        expect(polled.body).toEqual({ status: 'pending' });
      }
      expect(await sql(prod, 'select status, user_id, key_id from device_codes where user_code = ?', [attacker.user_code])).toEqual([{ status: 'pending', user_id: null, key_id: null }]);

      // The victim landed on the device page, where a code must be typed; nothing they saw named the attacker's code.
      expect(signedIn.headers.get('location')).toBe('/dashboard/device');
      expect(mail).not.toContain(attacker.user_code);
      expect(mail).toContain('type the code that your own terminal shows');
      expect(pageText).not.toContain(attacker.user_code);
      // Tying the victim's inbox to a user code instead is not a thing the API takes.
      expectError(await prod.request('POST', '/v1/auth/email/start', { body: { email: victim, user_code: attacker.user_code } }), 400, 'VALIDATION_FAILED');
      now += 901_000;
      expectError(await prod.request('POST', '/v1/auth/cli/poll', { body: { device_code: attacker.device_code } }), 410, 'DEVICE_CODE_EXPIRED');
    } finally {
      await prod.stop();
    }
  });

  it('GIVEN a signed-in member on the device page WHEN they type the user code THEN the CLI gets its key; an expired code is 410', async () => {
    let now = freshWindow();
    const { cookie } = await signIn(`page-${Date.now()}@example.com`);
    const dc = (await app.request('POST', '/v1/auth/cli/start', { body: {} })).body;
    // the older page address leads to the dashboard's device page, dropping the code: the person types it there
    const pageRes = await app.request('GET', `/v1/auth/device?user_code=${dc.user_code}`, { headers: withCookie(cookie) });
    expect(pageRes.status).toBe(303);
    expect(pageRes.headers.get('location')).toBe('/dashboard/device');

    // Cross-origin approval is refused; a same-origin one (lower case, no dash) works.
    expectError(await app.request('POST', '/v1/auth/cli/approve', { headers: withCookie(cookie, { origin: 'https://evil.example' }), body: { user_code: dc.user_code } }), 403, 'CSRF_REJECTED');
    expectError(await app.request('POST', '/v1/auth/cli/approve', { body: { user_code: dc.user_code } }), 401, 'INVALID_SESSION');
    const approved = await app.request('POST', '/v1/auth/cli/approve', {
      headers: withCookie(cookie, { origin: app.baseUrl }),
      body: { user_code: dc.user_code.replace('-', '').toLowerCase() },
    });
    expect(approved.status, approved.text).toBe(200);
    const ready = await app.request('POST', '/v1/auth/cli/poll', { body: { device_code: dc.device_code } });
    expect(ready.body.status).toBe('ready');

    const stale = (await app.request('POST', '/v1/auth/cli/start', { body: {} })).body;
    now += 901_000;
    app.services.now = () => new Date(now);
    expectError(await app.request('POST', '/v1/auth/cli/poll', { body: { device_code: stale.device_code } }), 410, 'DEVICE_CODE_EXPIRED');
    expectError(await app.request('POST', '/v1/auth/cli/approve', { headers: withCookie(cookie, { origin: app.baseUrl }), body: { user_code: stale.user_code } }), 410, 'DEVICE_CODE_EXPIRED');
    expectError(await app.request('POST', '/v1/auth/cli/poll', { body: { device_code: 'never-issued' } }), 410, 'DEVICE_CODE_EXPIRED');
  });
});

describe('rate limits', () => {
  it('GIVEN 5 starts for one email in 15 minutes WHEN a 6th comes THEN 429 RATE_LIMITED with Retry-After; the next window is open again', async () => {
    const t0 = freshWindow();
    const email = `limit-${Date.now()}@example.com`;
    for (let i = 0; i < 5; i++) expect((await start({ email })).status).toBe(200);
    const sixth = await start({ email });
    expectError(sixth, 429, 'RATE_LIMITED');
    expect(Number(sixth.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(sixth.headers.get('retry-after'))).toBeLessThanOrEqual(900);
    // Another email from the same address is still fine (the per-IP limit is 20).
    expect((await start({ email: `other-${email}` })).status).toBe(200);
    app.services.now = () => new Date(t0 + 900_000);
    expect((await start({ email })).status).toBe(200);
  });

  it('GIVEN 20 starts from one address in 15 minutes WHEN a 21st comes THEN 429 RATE_LIMITED, whatever the email', async () => {
    freshWindow();
    for (let i = 0; i < 20; i++) expect((await start({ email: `ip${i}-${Date.now()}@example.com` })).status).toBe(200);
    expectError(await start({ email: `ip-last-${Date.now()}@example.com` }), 429, 'RATE_LIMITED');
  });
});

describe('secrets at rest and in logs', () => {
  it('GIVEN sign-ins, device codes and minted keys WHEN the database and the logs are read THEN no token, session, device code or key secret is in them', async () => {
    let now = freshWindow();
    const { cookie, started } = await signIn(`secrets-${Date.now()}@example.com`);
    const dc = (await app.request('POST', '/v1/auth/cli/start', { body: {} })).body;
    await app.request('POST', '/v1/auth/cli/approve', { headers: withCookie(cookie, { origin: app.baseUrl }), body: { user_code: dc.user_code } });
    now += 6000;
    app.services.now = () => new Date(now);
    const ready = await app.request('POST', '/v1/auth/cli/poll', { body: { device_code: dc.device_code } });
    expect(ready.body.status).toBe('ready');
    const minted = await app.request('POST', '/v1/keys', { headers: withCookie(cookie, { origin: app.baseUrl }), body: { mode: 'live' } });

    const secrets = [started.body.dev_token, cookie, dc.device_code, ready.body.api_key.secret, minted.body.secret];
    const tables = ['users', 'memberships', 'sign_in_tokens', 'user_sessions', 'device_codes', 'api_keys', 'idempotency_keys', 'rate_limit_buckets'];
    for (const t of tables) {
      const dump = JSON.stringify(await sql(app, `select row_to_json(x) as r from ${t} x`));
      for (const secret of secrets) expect(dump, t).not.toContain(secret);
    }
    const logs = logLines.join('');
    expect(logs.length).toBeGreaterThan(0);
    for (const secret of secrets) expect(logs).not.toContain(secret);
  });
});
