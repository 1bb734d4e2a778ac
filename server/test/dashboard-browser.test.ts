import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AgentClient, verifyWebhook } from '@svc/sdk';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { TestApp } from './helpers/harness.js';
import { Receiver, waitUntil } from './helpers/webhooks.js';
import { sql } from './helpers/foundation.js';
import { launchChromium, shot, signInThroughUi } from './helpers/browser.js';
import { DomainProofWorld } from './helpers/domain-proof.js';
import { hostRequest } from './helpers/agent-protocol.js';

/**
 * The merchant dashboard in Debian's Chromium, against a real server (the built app under
 * /dashboard, the public API with the session cookie), a real webhook receiver and the SDK's
 * agent buying. Each step leaves a screenshot in test-results/dashboard/.
 */
let app: TestApp;
let browser: Browser;
let receiver: Receiver;
let worker: WebhookWorker;
let ctx: BrowserContext;
let page: Page;
let world: DomainProofWorld;
const email = `owner-${Date.now()}@example.com`;
const slug = `shop-${Date.now().toString(36)}`;
const PAY_TO = '0x2222222222222222222222222222222222222222';

beforeAll(async () => {
  app = await TestApp.start();
  world = await DomainProofWorld.start();
  world.install(app);
  receiver = await Receiver.start();
  // A failed attempt at a loopback receiver takes the whole attempt budget (lib/ssrf.ts): 3 s here, not 10.
  worker = startWebhookWorker(app.services, { pollIntervalMs: 50, timeoutMs: 3_000 });
  browser = await launchChromium();
  ctx = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 1280, height: 900 } });
  page = await ctx.newPage();
});
afterAll(async () => {
  await browser?.close();
  await worker?.stop();
  await receiver?.close();
  await app?.stop();
  await world?.close();
});

const agent = () => new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: randomUUID() });
const buy = async (qty = 1) => (await agent().discover(`${app.baseUrl}/m/${slug}`)).buy([{ sku: 'mug', qty }]);
const dialog = () => page.getByRole('dialog');
/** A page settles in its own time (a busy CI machine): poll for up to 15 s, not vitest's default 1 s. */
const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 60_000, interval: 100 });
const heading = (p: Page, name: string | RegExp) => p.getByRole('heading', { level: 1, name });

async function go(section: string, mode: 'test' | 'live' = 'test') {
  await page.getByRole('navigation').getByRole('link', { name: section, exact: true }).click();
  await poll(() => page.url()).toContain(`/dashboard/${mode}/`);
  await heading(page, section).waitFor();
}

async function pickOption(p: Page, label: string, option: string) {
  await p.getByRole('combobox', { name: label }).click();
  await p.getByRole('option', { name: option, exact: true }).click();
}

async function publishPolicy(policy: Record<string, unknown>, note: string) {
  await go('Policy');
  await page.getByLabel('Policy (JSON)').fill(JSON.stringify(policy, null, 2));
  await page.getByLabel('Note').fill(note);
  await page.getByRole('button', { name: 'Save version' }).click();
  await page.getByText(/Saved as version \d+/).waitFor();
  await page.getByRole('button', { name: 'Validate' }).click();
  await page.getByText('The configuration is valid and can be published.').waitFor();
  await page.getByRole('button', { name: 'Publish' }).click();
  await page.getByText(/Published: version \d+ is active/).waitFor();
}

describe('the merchant dashboard in Chromium', () => {
  it('GIVEN a signed-out browser WHEN it opens the dashboard THEN it signs in with the development magic link and lands on the test-mode overview', async () => {
    await page.goto('/');
    await page.waitForURL(/\/dashboard\/login$/);
    await shot(page, '01-sign-in');
    await signInThroughUi(page, email);
    await page.waitForURL(/\/dashboard\/test\/$/);
    await heading(page, 'Overview').waitFor();
    await poll(() => page.getByTestId('mode-banner').textContent()).toMatch(/^TEST MODE/);
    const cookie = (await ctx.cookies()).find((c) => c.name === 'svc_session');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax' });
    await shot(page, '02-overview-empty');
  });

  it('GIVEN `svc login` waiting on a device code WHEN the signed-in merchant types the code on the device page THEN the command line gets its key; a code in the address fills in nothing', async () => {
    const dc = await fetch(`${app.baseUrl}/v1/auth/cli/start`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' }).then((r) => r.json() as Promise<{ device_code: string; user_code: string; verification_url: string }>);
    expect(dc.verification_url).toBe(`${app.baseUrl}/dashboard/device`);
    // A link carrying a code (as a stranger could send one) approves nothing and fills nothing in.
    await page.goto(`${dc.verification_url}?user_code=${dc.user_code}`);
    await page.getByText(`Signed in as ${email}`).waitFor();
    const field = page.getByLabel('Code shown by your terminal');
    expect(await field.inputValue()).toBe('');
    expect(await page.getByRole('button', { name: 'Approve this device' }).isDisabled()).toBe(true);
    await field.fill(dc.user_code.toLowerCase());
    await page.getByRole('button', { name: 'Approve this device' }).click();
    await page.getByText('Device approved').waitFor();
    await shot(page, '02b-device-approved');
    const polled = await fetch(`${app.baseUrl}/v1/auth/cli/poll`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ device_code: dc.device_code }) }).then((r) => r.json() as Promise<{ status: string; api_key?: { secret: string } }>);
    expect(polled.status).toBe('ready');
    expect(polled.api_key!.secret).toMatch(/^svc_test_/);
    await page.goto('/dashboard/test/');
    await heading(page, 'Overview').waitFor();
  });

  it('GIVEN `svc login --email` WHEN the person follows the mailed link in a signed-out browser THEN it signs them in and opens the device page, where they type the code', async () => {
    const post = (path: string, body: unknown) => fetch(`${app.baseUrl}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }).then((r) => r.json() as Promise<any>);
    const dc = await post('/v1/auth/cli/start', {});
    const cliEmail = `cli-${Date.now()}@example.com`;
    const mailed = await post('/v1/auth/email/start', { email: cliEmail, device_code: dc.device_code });
    const other = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 390, height: 844 } });
    try {
      const p = await other.newPage();
      await p.goto(mailed.verify_url);
      await p.getByText('A command-line sign-in (svc login) asked for this link').waitFor();
      expect(await p.content()).not.toContain(dc.user_code);
      await p.getByRole('button', { name: 'Sign in' }).click();
      await p.waitForURL(/\/dashboard\/device$/);
      await heading(p, 'Sign in a command line').waitFor();
      expect((await post('/v1/auth/cli/poll', { device_code: dc.device_code })).status).toBe('pending');
      await p.getByLabel('Code shown by your terminal').fill(dc.user_code);
      await p.getByRole('button', { name: 'Approve this device' }).click();
      await p.getByText('Device approved').waitFor();
      await shot(p, '02c-device-from-mail');
      // approved for the member who typed it (the CLI's next poll, after its interval, gets the key)
      expect(await sql(app, 'select d.status, u.email from device_codes d join users u on u.id = d.user_id where d.user_code = ?', [dc.user_code])).toEqual([{ status: 'approved', email: cliEmail }]);
    } finally {
      await other.close();
    }
  });

  it('GIVEN a signed-in merchant WHEN they create a merchant, a product and a policy and publish THEN the agent-facing configuration is live, and a bad price is explained next to its field', async () => {
    await go('Merchants');
    await page.getByRole('button', { name: 'Create merchant' }).click();
    await dialog().getByLabel('Name').fill('Mug Shop');
    await dialog().getByLabel('Slug').fill(slug);
    await dialog().getByLabel('Domain').fill(`${slug}.example.com`);
    await dialog().getByLabel('USDC receiving address').fill(PAY_TO);
    await dialog().getByRole('button', { name: 'Create merchant' }).click();
    await page.getByTestId('merchant-row').filter({ hasText: 'Mug Shop' }).waitFor();
    await shot(page, '03-merchants');

    await go('Catalog');
    await page.getByRole('button', { name: 'Add product' }).click();
    await dialog().getByLabel('SKU').fill('mug');
    await dialog().getByLabel('Name').fill('Enamel mug');
    await dialog().getByLabel('Price').fill('12.5.0');
    await dialog().getByRole('button', { name: 'Create product' }).click();
    // the server's validation message, beside the field it names
    const priceError = dialog().locator('.mantine-TextInput-error').first();
    await poll(() => priceError.textContent()).toMatch(/decimal string/);
    await shot(page, '04-catalog-field-error');
    await dialog().getByLabel('Price').fill('12.50');
    await dialog().getByRole('button', { name: 'Create product' }).click();
    await page.getByTestId('product-row').filter({ hasText: '12.50 USD' }).waitFor();
    await page.getByRole('button', { name: 'Edit mug' }).click();
    await dialog().getByLabel('Price').fill('9.00');
    await dialog().getByRole('button', { name: 'Save' }).click();
    await page.getByTestId('product-row').filter({ hasText: '9.00 USD' }).waitFor();

    await publishPolicy({ holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 1000 }, 'accept everything');
    await shot(page, '05-policy-published');

    const catalog = (await fetch(`${app.baseUrl}/m/${slug}/agent/catalog`).then((r) => r.json())) as { items?: unknown[] };
    expect(catalog.items ?? catalog).toEqual(expect.arrayContaining([expect.objectContaining({ sku: 'mug' })]));
  });

  it("GIVEN the new merchant's domain, unverified WHEN the merchant publishes the TXT record the dashboard shows and presses Verify THEN the domain shows verified and agents reach the shop at it; before that, the refusal is shown", async () => {
    const domain = `${slug}.example.com`;
    await go('Merchants');
    const row = page.getByTestId('merchant-row').filter({ hasText: 'Mug Shop' });
    await row.getByText('unverified', { exact: true }).waitFor();
    expect((await hostRequest(app, 'GET', '/.well-known/agentic-checkout.json', domain)).status).toBe(404);

    await row.getByRole('button', { name: `Verify ${domain}` }).click();
    const txt = dialog().getByTestId('domain-proof-txt');
    await poll(() => txt.textContent()).toContain(`_svc-checkout.${domain}`);
    const value = (await txt.locator('code').nth(1).textContent())!;
    expect(value).toMatch(/^svc-verify=[0-9a-f]{32}$/);
    await poll(() => dialog().getByTestId('domain-proof-file').textContent()).toContain(`https://${domain}/.well-known/svc-checkout-verification.txt`);
    await dialog().getByRole('button', { name: 'Verify', exact: true }).click();
    await dialog().getByRole('alert').filter({ hasText: 'DOMAIN_VERIFICATION_FAILED' }).waitFor();
    await shot(page, '05b-domain-unverified');

    world.publishTxt(domain, value);
    await dialog().getByRole('button', { name: 'Verify', exact: true }).click();
    await row.getByText('verified', { exact: true }).waitFor();
    expect(await row.getByRole('button', { name: `Verify ${domain}` }).count()).toBe(0);
    await shot(page, '05c-domain-verified');
    const manifest = await hostRequest(app, 'GET', '/.well-known/agentic-checkout.json', domain);
    expect(manifest.status).toBe(200);
    expect(manifest.body.merchant).toMatchObject({ domain, domain_verified: true });
  });

  it('GIVEN a published merchant WHEN an agent buys through the SDK THEN the order appears, its receipt verifies in the browser and its events are listed', async () => {
    const outcome = await buy(2);
    expect(outcome.status).toBe('accepted');
    const orderId = (outcome as { order_id: string }).order_id;

    await go('Orders');
    const row = page.getByTestId('order-row').filter({ hasText: orderId });
    await row.waitFor();
    await poll(() => row.textContent()).toContain('18.00');
    await shot(page, '06-orders');
    await row.getByRole('link', { name: orderId }).click();
    await heading(page, `Order ${orderId}`).waitFor();
    await poll(() => page.getByTestId('receipt-status').textContent()).toBe('valid');
    await page.getByText('Policy version: 1').waitFor();
    await page.getByRole('link', { name: /order\.settled/ }).waitFor();
    await shot(page, '07-order');

    // a receipt whose signature does not match the merchant's keys shows as invalid
    // (the JWS is stored once, in receipts: the session reads it by join)
    const [row0] = await sql<{ id: string; receipt_jws: string }>(app, 'select id, jws as receipt_jws from receipts where order_id = ?', [orderId]);
    const [h, claims, sig] = row0!.receipt_jws.split('.');
    const forged = JSON.parse(Buffer.from(claims!, 'base64url').toString('utf8'));
    await sql(app, 'update receipts set jws = ? where id = ?', [[h, Buffer.from(JSON.stringify({ ...forged, total: { ...forged.total, total: '0.01' } })).toString('base64url'), sig].join('.'), row0!.id]);
    await page.reload();
    await poll(() => page.getByTestId('receipt-status').textContent()).toBe('invalid');
    await sql(app, 'update receipts set jws = ? where id = ?', [row0!.receipt_jws, row0!.id]);

    // filters: nothing is held yet
    await go('Orders');
    await pickOption(page, 'Decision', 'hold');
    await page.getByText('No orders match.').waitFor();
  });

  it('GIVEN an endpoint created in the dashboard that fails WHEN its event is replayed after the receiver recovers THEN the replay is delivered, signed, and shown with its attempts', async () => {
    receiver.respond = () => 500;
    await go('Webhooks');
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await dialog().getByLabel('Endpoint URL').fill(receiver.url('/hook'));
    await dialog().getByRole('button', { name: 'Add endpoint' }).click();
    const secret = (await page.getByTestId('secret-once').textContent())!.trim();
    expect(secret).toMatch(/^whsec_/);
    await shot(page, '08-endpoint-secret');
    await page.getByRole('button', { name: 'Done' }).click();

    const outcome = await buy();
    expect(outcome.status).toBe('accepted');
    await receiver.waitForHits(2, '/hook');
    const settledHit = receiver.on('/hook').map((h) => JSON.parse(h.raw.toString('utf8'))).find((b) => b.type === 'order.settled');
    expect(settledHit.data.object.id).toBe((outcome as { order_id: string }).order_id);

    // A loopback receiver's failure is recorded once the attempt budget has passed, after the hit.
    await waitUntil(async () => {
      const [r] = await sql(app, "select count(*)::int as n from webhook_attempts where event_id = ? and status = 'failed'", [settledHit.id]);
      return Number(r!.n) > 0;
    }, 'the failed attempt recorded');
    await page.goto(`/dashboard/test/webhooks/events/${settledHit.id}`);
    await heading(page, `Event ${settledHit.id}`).waitFor();
    // A loopback receiver's failure is shown without its status (no port state, docs/webhooks.md).
    await page.getByTestId('attempt').filter({ hasText: 'no 2xx answer from a non-public address' }).first().waitFor();

    receiver.respond = () => 200;
    const before = receiver.on('/hook').length;
    await page.getByRole('button', { name: 'Replay' }).click();
    await page.getByText(/Replay queued to 1 endpoint/).waitFor();
    const replayed = await waitUntil(async () => receiver.on('/hook').slice(before).find((h) => JSON.parse(h.raw.toString('utf8')).id === settledHit.id), 'the replayed delivery');
    expect(verifyWebhook(replayed.raw, String(replayed.headers['svc-signature']), secret).ok).toBe(true);
    await waitUntil(async () => {
      await page.reload();
      // the deliveries render once the page's requests answer: count them then, not at the load event
      await page.getByTestId('delivery').first().waitFor();
      return (await page.getByTestId('delivery').filter({ hasText: '(replay)' }).filter({ hasText: 'succeeded' }).count()) > 0;
    }, 'the replay shown as succeeded');
    await shot(page, '09-event-replayed');

    // a test event goes to that endpoint only, and is not an order a receiver could fulfil
    await go('Webhooks');
    const count = receiver.on('/hook').length;
    await page.getByTestId('endpoint-row').getByRole('button', { name: 'Send test event' }).click();
    await page.getByText(/Test event evt_\w+ queued/).waitFor();
    const test = await waitUntil(async () => receiver.on('/hook').slice(count).map((h) => JSON.parse(h.raw.toString('utf8'))).find((b) => b.type === 'webhook_endpoint.test'), 'the test event');
    expect(test.type).toBe('webhook_endpoint.test');
  });

  it('GIVEN a policy that holds WHEN the agent is held THEN review_url opens the review page (after sign-in), approval captures and the receiver gets order.settled; the policy versions diff', async () => {
    await publishPolicy({ holdForReviewBelowTier: 'premium', requireMandateOverUsd: null, maxPerTransactionUsd: 1000 }, 'hold for review');
    await pickOption(page, 'Compare version', '1');
    await pickOption(page, 'with version', '2');
    await poll(() => page.getByLabel('Differences').textContent()).toContain('+   "holdForReviewBelowTier": "premium"');
    await shot(page, '10-policy-diff');

    const outcome = await buy();
    expect(outcome.status).toBe('hold');
    const reviewUrl = (outcome as { review_url: string }).review_url;
    await go('Holds');
    await page.getByTestId('hold-row').filter({ hasText: reviewUrl.split('/').pop()! }).waitFor();
    await shot(page, '10b-holds-queue');
    expect(reviewUrl).toMatch(new RegExp(`^${app.baseUrl}/dashboard/test/holds/sess_`));

    // a person who follows review_url signed out signs in and lands on that review
    const other = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 1280, height: 900 } });
    const reviewer = await other.newPage();
    await reviewer.goto(reviewUrl);
    await reviewer.waitForURL(/\/dashboard\/login$/);
    await signInThroughUi(reviewer, email);
    await reviewer.waitForURL(reviewUrl);
    await heading(reviewer, /^Review sess_/).waitFor();
    // why, in words: the rule that held it (issue 29; dashboard-orders-browser.test.ts checks the whole sentence)
    await reviewer.getByTestId('verdict-reasons').getByText(/^Held for review by the rule "hold agents below the premium trust tier"/).waitFor();
    await poll(() => reviewer.getByTestId('time-left').textContent()).toMatch(/Time left to review: 2[34] h/);
    await shot(reviewer, '11-hold-review');

    const before = receiver.on('/hook').length;
    await reviewer.getByRole('button', { name: 'Approve', exact: true }).click();
    await reviewer.getByRole('dialog').getByRole('button', { name: 'Approve and capture' }).click();
    await poll(() => reviewer.getByTestId('session-state').textContent()).toBe('accepted');
    await shot(reviewer, '12-hold-approved');
    await other.close();

    const sessionId = reviewUrl.split('/').pop()!;
    const settled = await waitUntil(
      async () => receiver.on('/hook').slice(before).map((h) => JSON.parse(h.raw.toString('utf8'))).find((b) => b.type === 'order.settled' && b.data.object.session_id === sessionId),
      'order.settled for the approved hold',
    );
    expect(settled.data.object.receipt_id).toMatch(/^rcpt_/);
  });

  it('GIVEN the developers page WHEN a key is created THEN its secret works once shown, and after revoking it is refused', async () => {
    await go('Developers');
    await page.getByTestId('jwks-url').filter({ hasText: `/m/${slug}/.well-known/jwks.json` }).waitFor();
    await page.getByRole('button', { name: 'Create key' }).click();
    await dialog().getByLabel('Name').fill('ci key');
    await dialog().getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.getByTestId('secret-once').textContent())!.trim();
    expect(secret).toMatch(/^svc_test_/);
    await page.getByRole('button', { name: 'Done' }).click();
    const me = () => fetch(`${app.baseUrl}/v1/me`, { headers: { authorization: `Bearer ${secret}` } });
    expect((await me()).status).toBe(200);
    await shot(page, '13-developers');

    await page.getByRole('button', { name: 'Revoke ci key' }).click();
    await dialog().getByRole('button', { name: 'Revoke' }).click();
    await page.getByTestId('key-row').filter({ hasText: 'ci key' }).filter({ hasText: 'revoked' }).waitFor();
    expect((await me()).status).toBe(401);
  });

  it('GIVEN sales, a hold and a failing endpoint WHEN the overview opens THEN it shows the volume, the orders by decision and what needs attention', async () => {
    await go('Overview');
    // three accepted sales of this test (18.00 + 9.00 + the approved hold's 9.00)
    await poll(() => page.getByTestId('stat-today').textContent()).toContain('36.00 USDC');
    await poll(() => page.getByTestId('stat-decisions').textContent()).toContain('3 / 0 / 0');
    // today's bar, the last of the 14 days, has height
    await page.locator('.recharts-bar-rectangle path').last().waitFor();
    await shot(page, '13b-overview');
  });

  it('GIVEN data in test mode WHEN switching to live THEN no test data shows, live data stays in live, and the banner says which mode', async () => {
    await go('Orders');
    await page.getByText('Live', { exact: true }).click();
    await page.waitForURL(/\/dashboard\/live\/orders(\?|$)/);
    await poll(() => page.getByTestId('mode-banner').textContent()).toMatch(/^LIVE MODE/);
    await page.getByText('No orders match.').waitFor();
    expect(await page.getByTestId('order-row').count()).toBe(0);

    await go('Merchants', 'live');
    expect(await page.getByTestId('merchant-row').count()).toBe(0);
    await page.getByRole('button', { name: 'Create merchant' }).click();
    await dialog().getByLabel('Name').fill('Live Mugs');
    await dialog().getByLabel('Slug').fill(`${slug}-live`);
    await dialog().getByLabel('Domain').fill(`${slug}-live.example.com`);
    await dialog().getByLabel('USDC receiving address').fill(PAY_TO);
    await dialog().getByRole('button', { name: 'Create merchant' }).click();
    await page.getByTestId('merchant-row').filter({ hasText: 'Live Mugs' }).waitFor();
    await go('Developers', 'live');
    await page.getByText('No keys in live mode.').waitFor();
    await go('Catalog', 'live');
    await page.getByText('No products yet.').waitFor();
    await shot(page, '14-live-mode');

    await page.getByText('Test', { exact: true }).click();
    await page.waitForURL(/\/dashboard\/test\/catalog(\?|$)/);
    await poll(() => page.getByTestId('mode-banner').textContent()).toMatch(/^TEST MODE/);
    await page.getByTestId('product-row').filter({ hasText: 'mug' }).waitFor();
    await go('Merchants');
    await page.getByTestId('merchant-row').filter({ hasText: 'Mug Shop' }).waitFor();
    expect(await page.getByTestId('merchant-row').filter({ hasText: 'Live Mugs' }).count()).toBe(0);
  });

  it('GIVEN a phone-sized window THEN the navigation works by keyboard, and every control on every page has an accessible name', async () => {
    const phone = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 390, height: 844 }, storageState: await ctx.storageState() });
    const p = await phone.newPage();
    await p.goto('/dashboard/test/orders');
    await heading(p, 'Orders').waitFor();
    await p.getByRole('button', { name: 'Toggle navigation' }).focus();
    await p.keyboard.press('Enter');
    await p.getByRole('navigation').getByRole('link', { name: 'Holds', exact: true }).focus();
    await p.keyboard.press('Enter');
    await heading(p, 'Holds').waitFor();
    await shot(p, '15-phone-holds');

    const cdp = await phone.newCDPSession(p);
    const interactive = new Set(['button', 'link', 'textbox', 'combobox', 'checkbox', 'switch', 'radio', 'searchbox', 'spinbutton', 'menuitem', 'tab']);
    for (const section of ['', 'orders', 'holds', 'catalog', 'receiving', 'policy', 'webhooks', 'developers', 'reputation', 'merchants']) {
      await p.goto(`/dashboard/test/${section}`);
      await p.getByRole('heading', { level: 1 }).waitFor();
      await p.waitForLoadState('networkidle');
      await shot(p, `16-phone-${section || 'overview'}`);
      const { nodes } = (await cdp.send('Accessibility.getFullAXTree')) as { nodes: Array<{ ignored: boolean; role?: { value: string }; name?: { value: string } }> };
      const unnamed = nodes.filter((n) => !n.ignored && interactive.has(n.role?.value ?? '') && !(n.name?.value ?? '').trim()).map((n) => n.role?.value);
      expect(unnamed, `unnamed controls on /${section}`).toEqual([]);
    }
    await phone.close();
  });
});
