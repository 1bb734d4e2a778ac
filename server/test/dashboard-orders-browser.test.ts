import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AgentClient, MerchantClient, type Merchant } from '@svc/sdk';
import { TestApp } from './helpers/harness.js';
import { launchChromium, shot, signInThroughUi } from './helpers/browser.js';

/**
 * The dashboard beside Stripe's (issue 29), in Debian's Chromium against a real server: a hold
 * says in words which policy rule held it (one tier vocabulary), the order page names the payer's
 * wallet, the orders feed is searched by order, session and agent id and exported as CSV (the
 * downloaded file), and every page is photographed at 1280 px and 390 px, where no table is
 * wider than the screen.
 */

let app: TestApp;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
let svc: MerchantClient;
let merchant: Merchant;
const buyer = privateKeyToAccount(generatePrivateKey());
const agentId = randomUUID();
const email = `orders-${Date.now()}@example.com`;
let held: { sessionId: string; orderId: string };

const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 60_000, interval: 100 });
const heading = (p: Page, name: string | RegExp) => p.getByRole('heading', { level: 1, name });

async function go(section: string) {
  await page.getByRole('navigation').getByRole('link', { name: section, exact: true }).click();
  await heading(page, section).waitFor();
}

beforeAll(async () => {
  app = await TestApp.start();
  browser = await launchChromium();
  ctx = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 1280, height: 900 }, acceptDownloads: true });
  page = await ctx.newPage();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe('orders, holds and search in the merchant dashboard', () => {
  it('GIVEN a policy that holds agents below the standard trust tier WHEN a new agent buys THEN the hold page says in words which rule held it, with the trust tier and the reputation told apart', async () => {
    await page.goto('/');
    await page.waitForURL(/\/dashboard\/login$/);
    await signInThroughUi(page, email);
    await heading(page, 'Overview').waitFor();
    const projectId = await page.evaluate(async () => ((await (await fetch('/v1/me', { headers: { 'svc-mode': 'test' } })).json()) as { project: { id: string } }).project.id);
    svc = new MerchantClient({ apiKey: (await app.key('test', { projectId })).secret, baseUrl: app.baseUrl });
    const slug = `hold-shop-${Date.now().toString(36)}`;
    merchant = await svc.merchants.create({ slug, name: 'Hold Shop', domain: `${slug}.example.com`, receiving: { x402: { chain: 'base-sepolia', address: privateKeyToAccount(generatePrivateKey()).address } } });
    const scope = { merchant_id: merchant.id };
    await svc.catalog.create({ sku: 'kettle', name: 'Copper kettle', price: { amount: '42.00', currency: 'USD' } }, scope);
    await svc.policy.put({ body: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null, maxPerTransactionUsd: 1000 } }, scope);
    await svc.policy.publish(scope);

    const shop = await new AgentClient({ account: buyer, agentId }).discover(`${app.baseUrl}/m/${merchant.id}`);
    const outcome = await shop.buy([{ sku: 'kettle', qty: 1 }], { rail: 'x402' });
    if (outcome.status !== 'hold') throw new Error(JSON.stringify(outcome));
    const order = (await svc.orders.list({ q: outcome.session_id }).toArray({ max: 5 }))[0]!;
    held = { sessionId: outcome.session_id, orderId: order.id };

    await page.reload();
    await go('Holds');
    const row = page.getByTestId('hold-row').filter({ hasText: held.sessionId });
    await row.getByText('hold agents below the standard trust tier').waitFor();
    await shot(page, 'o01-holds-queue');
    await row.getByRole('link', { name: held.sessionId }).click();
    await heading(page, `Review ${held.sessionId}`).waitFor();
    const reasons = page.getByTestId('verdict-reasons');
    await poll(() => reasons.textContent()).toContain(
      'Held for review by the rule "hold agents below the standard trust tier": this agent\'s trust tier is cautious (no mandate and no purchase history the reputation service knows).',
    );
    expect(await reasons.textContent()).toContain('rule holdForReviewBelowTier');
    expect(await reasons.textContent()).not.toMatch(/^HOLD_FOR_REVIEW/);
    await page.getByText('Trust tier (the gate\'s, read by the policy\'s tier rules): cautious: no mandate and no purchase history the reputation service knows').waitFor();
    await poll(() => page.getByTestId('agent-reputation').textContent()).toMatch(/^Reputation \(from the reputation service\): score \d+, reputation tier \w+(, an agent it does not know yet)?$/);
    await shot(page, 'o02-hold-in-words');
  });

  it('GIVEN the held order WHEN its order page opens THEN it names the payer\'s wallet (no explorer link in test mode)', async () => {
    await page.goto(`/dashboard/test/orders/${held.sessionId}`);
    await heading(page, `Order ${held.orderId}`).waitFor();
    await poll(() => page.getByTestId('payer').textContent()).toBe(`Payer wallet: ${buyer.address}`);
    expect(await page.getByTestId('payer').getByRole('link').count()).toBe(0);
    await page.getByText('order.held').first().waitFor();
    await shot(page, 'o03-order-payer');
  });

  it('GIVEN orders of two agents WHEN the feed is searched by order id, session id and agent id THEN only the matching orders show', async () => {
    const other = await new AgentClient({ account: privateKeyToAccount(generatePrivateKey()), agentId: randomUUID() }).discover(`${app.baseUrl}/m/${merchant.id}`);
    const second = await other.buy([{ sku: 'kettle', qty: 2 }], { rail: 'x402' });
    if (second.status !== 'hold') throw new Error(JSON.stringify(second));
    await go('Orders');
    await poll(() => page.getByTestId('order-row').count()).toBe(2);
    const search = page.getByLabel('Search');
    for (const q of [held.orderId, held.sessionId, agentId]) {
      await search.fill(q);
      await poll(() => page.getByTestId('order-row').count()).toBe(1);
      await page.getByTestId('order-row').getByRole('link', { name: held.orderId }).waitFor();
    }
    await search.fill(randomUUID());
    await page.getByText('No orders match.').waitFor();
    await search.fill('');
    await poll(() => page.getByTestId('order-row').count()).toBe(2);
    await shot(page, 'o04-orders-search');
  });

  it('GIVEN the feed WHEN Export CSV is pressed THEN the browser downloads every order of the filters as CSV', async () => {
    const [download] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    expect(download.suggestedFilename()).toBe('orders-test.csv');
    const csv = readFileSync((await download.path())!, 'utf8').trimEnd().split('\n');
    expect(csv[0]).toMatch(/^id,created_at,merchant_id,session_id,agent_id,decision,trust_tier/);
    expect(csv).toHaveLength(3);
    expect(csv.find((l) => l.startsWith(held.orderId))).toContain(`${held.sessionId},${agentId},hold,cautious,hosted,USD,42.00,0.00,42.00`);

    await page.getByLabel('Search').fill(agentId);
    await poll(() => page.getByTestId('order-row').count()).toBe(1);
    const [filtered] = await Promise.all([page.waitForEvent('download'), page.getByRole('button', { name: 'Export CSV' }).click()]);
    expect(readFileSync((await filtered.path())!, 'utf8').trimEnd().split('\n')).toHaveLength(2);
    await page.getByLabel('Search').fill('');
  });

  it('GIVEN /favicon.ico WHEN fetched THEN an icon, not a 404', async () => {
    const res = await fetch(`${app.baseUrl}/favicon.ico`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^image\/svg\+xml/);
  });

  it('GIVEN every page WHEN shown at 1280 px and 390 px THEN a screenshot of each, and no table wider than a phone', async () => {
    const pages = ['', 'orders', `orders/${held.sessionId}`, 'holds', `holds/${held.sessionId}`, 'catalog', 'receiving', 'policy', 'webhooks', 'developers', 'reputation', 'merchants'];
    for (const width of [1280, 390]) {
      const context = await browser.newContext({ baseURL: app.baseUrl, viewport: { width, height: 900 }, storageState: await ctx.storageState() });
      const p = await context.newPage();
      for (const section of pages) {
        await p.goto(`/dashboard/test/${section}`);
        await p.getByRole('heading', { level: 1 }).waitFor();
        await p.waitForLoadState('networkidle');
        await shot(p, `o-${width}-${section.replaceAll('/', '-') || 'overview'}`);
        if (width === 390) {
          // nothing wider than the screen: no table (or anything else) scrolls sideways
          const overflow = (await p.evaluate('document.documentElement.scrollWidth - document.documentElement.clientWidth')) as number;
          expect(overflow, `/${section} is wider than the phone`).toBeLessThanOrEqual(0);
          const tables = await p.locator('table').evaluateAll((ts) => ts.map((t) => t.getBoundingClientRect().right));
          for (const right of tables) expect(right, `a table of /${section}`).toBeLessThanOrEqual(390);
        }
      }
      await context.close();
    }
  });
});
