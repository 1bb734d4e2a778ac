import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { parseCommand } from '../src/modules/operator/index.js';
import { createProject } from '../src/modules/accounts/index.js';
import { sql } from './helpers/foundation.js';
import { merchantBody, TestApp } from './helpers/harness.js';
import { launchChromium, shot, signInThroughUi } from './helpers/browser.js';

/**
 * Issue 29 in Chromium: what `keys create` made shows in the first account's dashboard, the
 * shell switches projects (only the member's), the project and merchant live in the address
 * (a reload keeps the shop), and the policy page's form warns before publishing a policy that
 * turns away every new agent. Screenshots at 1280 and 390 px in test-results/dashboard/.
 */
let app: TestApp;
let browser: Browser;
let ctx: BrowserContext;
let page: Page;
let cliProject: string;
let shops: { first: string; second: string };
let otherProject: string;

const poll = <T>(fn: () => T | Promise<T>) => expect.poll(fn, { timeout: 60_000, interval: 100 });
const heading = (p: Page, name: string | RegExp) => p.getByRole('heading', { level: 1, name });
const param = (p: Page, name: string) => new URL(p.url()).searchParams.get(name);

async function pickOption(p: Page, label: string, option: string) {
  await p.getByRole('combobox', { name: label }).click();
  await p.getByRole('option', { name: option, exact: true }).click();
}

beforeAll(async () => {
  app = await TestApp.start();
  // GIVEN the README's walk-through: a key from `keys create`, and two shops made with it
  const parsed = parseCommand(['keys', 'create', '--mode', 'test', '--json']);
  if (parsed.help) throw new Error('unexpected help');
  const key = JSON.parse(await parsed.command.run(parsed.values, parsed.positionals, app.services)) as { secret: string; project_id: string };
  cliProject = key.project_id;
  const made = [];
  for (const name of ['CLI Coffee', 'CLI Books']) {
    const m = await app.request('POST', '/v1/merchants', { key: key.secret, body: merchantBody({ name }) });
    expect(m.status, m.text).toBe(201);
    made.push(m.body.id as string);
  }
  shops = { first: made[0]!, second: made[1]! };
  browser = await launchChromium();
  ctx = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 1280, height: 900 } });
  page = await ctx.newPage();
});
afterAll(async () => {
  await browser?.close();
  await app?.stop();
});

describe('projects and merchants in the dashboard', () => {
  it('GIVEN shops made with a CLI key WHEN the first person signs in THEN the dashboard is the Default project and shows them', async () => {
    await page.goto('/');
    await page.waitForURL(/\/dashboard\/login$/);
    await signInThroughUi(page, 'owner@example.com');
    await heading(page, 'Overview').waitFor();
    await poll(() => page.getByRole('combobox', { name: 'Project' }).inputValue()).toBe('Default project');
    await poll(() => page.getByRole('combobox', { name: 'Merchant' }).inputValue()).toBe('CLI Coffee');
  });

  it('WHEN another merchant is picked THEN the address names it, links keep it, and a reload opens the same shop', async () => {
    await pickOption(page, 'Merchant', 'CLI Books');
    await poll(() => param(page, 'merchant')).toBe(shops.second);
    expect(param(page, 'project')).toBe(cliProject);
    await page.getByRole('navigation').getByRole('link', { name: 'Catalog', exact: true }).click();
    await heading(page, 'Catalog').waitFor();
    await poll(() => new URL(page.url()).pathname).toBe('/dashboard/test/catalog');
    expect(param(page, 'merchant')).toBe(shops.second);
    await page.reload();
    await heading(page, 'Catalog').waitFor();
    await poll(() => page.getByRole('combobox', { name: 'Merchant' }).inputValue()).toBe('CLI Books');
    await shot(page, 'p01-merchant-in-address');
    // the same address in a new tab of the same person: the same shop, whatever the other tab picked last
    const tab = await ctx.newPage();
    await tab.goto(page.url().replace(app.baseUrl, ''));
    await poll(() => tab.getByRole('combobox', { name: 'Merchant' }).inputValue()).toBe('CLI Books');
    await tab.close();
    // a merchant that is not this project's: said, never swapped for the default shop
    await page.goto(`/dashboard/test/catalog?project=${cliProject}&merchant=mch_00000000000000000000000000`);
    await page.getByRole('alert').filter({ hasText: 'No such merchant here' }).waitFor();
  });

  it('GIVEN the person is a member of a second project WHEN they switch projects in the shell THEN the pages show that project, and switching back restores the first', async () => {
    const second = await createProject(app.services.orm.em.fork(), 'Side project', { now: new Date() });
    otherProject = second.id;
    const [user] = await sql<{ id: string }>(app, `select id from users where email = 'owner@example.com'`);
    await sql(app, `insert into memberships (user_id, organization_id, role, created_at) values (?, ?, 'member', now())`, [user!.id, second.organizationId]);
    await page.goto(`/dashboard/test/?project=${cliProject}`);
    await heading(page, 'Overview').waitFor();
    await pickOption(page, 'Project', 'Side project');
    await poll(() => param(page, 'project')).toBe(otherProject);
    await page.getByText('No merchant in test mode yet.').waitFor();
    expect(await page.getByRole('combobox', { name: 'Merchant' }).count()).toBe(0);
    await shot(page, 'p02-project-switched');
    await page.reload();
    await poll(() => page.getByRole('combobox', { name: 'Project' }).inputValue()).toBe('Side project');
    await pickOption(page, 'Project', 'Default project');
    await poll(() => page.getByRole('combobox', { name: 'Merchant' }).inputValue()).toBe('CLI Coffee');
  });

  it('GIVEN another account WHEN it opens an address of the Default project THEN it is refused and sees none of that project', async () => {
    const other = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 1280, height: 900 } });
    try {
      const p = await other.newPage();
      await p.goto('/dashboard/login');
      await signInThroughUi(p, 'stranger@example.com');
      await heading(p, 'Overview').waitFor();
      await poll(() => p.getByRole('combobox', { name: 'Project' }).inputValue()).toBe('My project');
      await p.getByRole('combobox', { name: 'Project' }).click();
      expect(await p.getByRole('option').allTextContents()).toEqual(['My project']);
      await p.keyboard.press('Escape');
      await p.goto(`/dashboard/test/catalog?project=${cliProject}&merchant=${shops.first}`);
      await p.getByText('No such project among yours').waitFor();
      expect(await p.content()).not.toContain('CLI Coffee');
      await shot(p, 'p03-foreign-project-refused');
      await p.getByRole('link', { name: 'Open your project' }).click();
      await heading(p, 'Overview').waitFor();
      await poll(() => p.getByRole('combobox', { name: 'Project' }).inputValue()).toBe('My project');
      expect(await p.content()).not.toContain('CLI Coffee');
    } finally {
      await other.close();
    }
  });

  it('GIVEN the policy page WHEN the form sets a mandate over 0 USD THEN the JSON follows, a warning shows before saving, validate repeats it, and it still publishes', async () => {
    await page.goto(`/dashboard/test/policy?project=${cliProject}&merchant=${shops.first}`);
    await heading(page, 'Policy').waitFor();
    await pickOption(page, 'Start from a preset', 'STRICT');
    await poll(() => page.getByLabel('Policy (JSON)').inputValue()).toContain('"requireMandateOverUsd": 10');
    expect(await page.getByTestId('draft-warnings').count()).toBe(0);
    await page.getByLabel('Require a mandate over (USD)').fill('0');
    await poll(() => page.getByLabel('Policy (JSON)').inputValue()).toContain('"requireMandateOverUsd": 0');
    await page.getByTestId('draft-warnings').filter({ hasText: 'POLICY_REJECTS_NEW_AGENTS' }).waitFor();
    await pickOption(page, 'Hold for review below trust tier', 'Never hold');
    await poll(() => page.getByLabel('Policy (JSON)').inputValue()).toContain('"holdForReviewBelowTier": null');
    await page.getByRole('button', { name: 'Save version' }).click();
    // saving validates at once: the server's warning shows before anyone presses Publish
    await page.getByTestId('validate-warnings').filter({ hasText: 'requireMandateOverUsd: 0 requires a mandate on every purchase' }).waitFor();
    await page.getByText('The configuration is valid and can be published.').waitFor();
    await shot(page, 'p04-policy-form-warning');
    await page.getByRole('button', { name: 'Publish' }).click();
    await page.getByText(/Published: version 1 is active/).waitFor();
    const [active] = await sql<{ body: Record<string, unknown> }>(app, 'select body from policy_versions where merchant_id = ? and active', [shops.first]);
    expect(active!.body).toMatchObject({ requireMandateOverUsd: 0, holdForReviewBelowTier: null, minReputationTier: 'standard' });
  });

  it('GIVEN a phone-sized window THEN the project and merchant pickers are in the menu and the policy form fits', async () => {
    const phone = await browser.newContext({ baseURL: app.baseUrl, viewport: { width: 390, height: 844 }, storageState: await ctx.storageState() });
    try {
      const p = await phone.newPage();
      await p.goto(`/dashboard/test/policy?project=${cliProject}&merchant=${shops.second}`);
      await heading(p, 'Policy').waitFor();
      await p.getByLabel('Require a mandate over (USD)').waitFor();
      expect(await p.locator('html').evaluate((html) => html.scrollWidth)).toBeLessThanOrEqual(390);
      await shot(p, 'p05-phone-policy');
      await p.getByRole('button', { name: 'Toggle navigation' }).click();
      await poll(() => p.getByRole('combobox', { name: 'Project (menu)' }).inputValue()).toBe('Default project');
      await poll(() => p.getByRole('combobox', { name: 'Merchant (menu)' }).inputValue()).toBe('CLI Books');
      await shot(p, 'p06-phone-menu-pickers');
    } finally {
      await phone.close();
    }
  });
});
