import { mkdtempSync, utimesSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildDashboardInBackground, dashboardBuilding } from '../src/http/dashboard-build.js';
import { dashboardRouter } from '../src/http/dashboard.js';
import { createLogger } from '../src/lib/logger.js';

/** The dashboard's pages before, during and after a build, without a browser (dashboard-browser.test.ts drives the built app). */
let dir: string;
let server: Server;
let base: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'svc-dashboard-'));
  const app = express();
  app.use(dashboardRouter(dir));
  await new Promise<void>((resolve) => {
    server = app.listen(0, '127.0.0.1', () => resolve());
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise<void>((r) => (server ? server.close(() => r()) : r()));
});

describe('serving the dashboard', () => {
  it('GIVEN no build WHEN a page is asked for THEN 503 saying how to build; WHEN index.html appears or changes THEN the page served is the new one, without a restart', async () => {
    const missing = await fetch(`${base}/dashboard/orders`);
    expect(missing.status).toBe(503);
    expect(await missing.text()).toMatch(/npm run build:dashboard/);

    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>first</title>');
    const first = await fetch(`${base}/dashboard/orders`);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-security-policy')).toContain("script-src 'self'");
    expect(await first.text()).toContain('first');

    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>second</title>');
    const later = new Date(Date.now() + 5_000);
    utimesSync(join(dir, 'index.html'), later, later);
    expect(await (await fetch(`${base}/dashboard/`)).text()).toContain('second');
  });

  it('GIVEN a background build running WHEN a page is asked for THEN 503 with Retry-After and a page that reloads itself; WHEN it ends THEN the built page', async () => {
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>built</title>');
    // a stand-in child for Vite that takes a moment: the state machine and the child process are real
    const done = buildDashboardInBackground(createLogger('silent'), { force: true, argv: ['-e', 'setTimeout(() => {}, 1500)'] });
    expect(done).not.toBeNull();
    expect(dashboardBuilding()).toBe(true);
    const during = await fetch(`${base}/dashboard/holds`);
    expect(during.status).toBe(503);
    expect(during.headers.get('retry-after')).toBe('2');
    expect(during.headers.get('content-security-policy')).toContain("script-src 'self'");
    const page = await during.text();
    expect(page).toContain('<meta http-equiv="refresh" content="2">');
    expect(page).not.toContain('<script');
    // a second start while one runs is not started
    expect(buildDashboardInBackground(createLogger('silent'), { force: true, argv: ['-e', ''] })).toBeNull();

    expect(await done).toBe(true);
    expect(dashboardBuilding()).toBe(false);
    const after = await fetch(`${base}/dashboard/holds`);
    expect(after.status).toBe(200);
    expect(await after.text()).toContain('built');
  });
});
