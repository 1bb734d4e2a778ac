import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { ROOT } from './spawn.js';

/** Debian's Chromium (`apt-get install -y chromium`; .ci/run installs it). Never a downloaded browser. */
export const CHROMIUM = process.env.SVC_CHROMIUM ?? '/usr/bin/chromium';

/** Screenshots for a reviewer: test-results/dashboard/<name>.png (git-ignored). */
export const SHOTS_DIR = join(ROOT, 'test-results', 'dashboard');

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`);
  mkdirSync(SHOTS_DIR, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // as root in a sandbox, on a machine whose network is closed: no background connections
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--disable-dev-shm-usage'],
  });
}

export async function shot(page: Page, name: string): Promise<void> {
  // finite CSS transitions (a closing modal, the menu sliding away) jump to their end state
  await page.screenshot({ path: join(SHOTS_DIR, `${name}.png`), fullPage: true, animations: 'disabled' });
}

/**
 * Signs in through the pages, as a person does on a development server: the sign-in form,
 * then the development link the page shows (the same link the mail carries), then the
 * link's page's button.
 */
export async function signInThroughUi(page: Page, email: string): Promise<void> {
  await page.getByLabel('Email').fill(email);
  await page.getByRole('button', { name: 'Email me a sign-in link' }).click();
  await page.getByTestId('dev-signin-link').click();
  await page.getByRole('button', { name: 'Sign in' }).click();
}
