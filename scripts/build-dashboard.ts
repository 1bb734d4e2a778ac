/**
 * Builds the dashboard (dashboard/dist) when its inputs changed since the last build: the
 * app's sources, its Vite config and package, and the contract and receipt verifier it imports.
 * `npm start` runs it in the background when dist/ is missing or stale (server/src/http/
 * dashboard-build.ts), so a fresh clone serves the dashboard moments after `npm ci && npm start`
 * without waiting for it to start; `npm run build` always builds.
 *
 *   tsx scripts/build-dashboard.ts [--force]
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DASHBOARD_DIR, DASHBOARD_STAMP, dashboardInputsHash, dashboardIsStale } from '../server/src/http/dashboard-build.js';

export { dashboardInputsHash };

/** Builds unless dist/ was built from exactly these inputs; returns whether it built. */
export async function ensureDashboardBuilt(opts: { force?: boolean } = {}): Promise<boolean> {
  const hash = dashboardInputsHash();
  if (!opts.force && !dashboardIsStale(hash)) return false;
  const { build } = await import('vite');
  await build({ root: DASHBOARD_DIR, configFile: join(DASHBOARD_DIR, 'vite.config.ts'), logLevel: 'warn' });
  writeFileSync(DASHBOARD_STAMP, hash);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  const built = await ensureDashboardBuilt({ force: process.argv.includes('--force') });
  console.log(built ? `dashboard built in ${((Date.now() - started) / 1000).toFixed(1)} s` : 'dashboard up to date');
}
