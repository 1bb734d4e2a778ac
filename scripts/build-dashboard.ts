/**
 * Builds the dashboard (dashboard/dist) when its inputs changed since the last build: the
 * app's sources, its Vite config and package, and the contract and receipt verifier it imports.
 * `npm start` runs it first (a no-op in about a tenth of a second when nothing changed), so a
 * fresh clone serves the dashboard after `npm ci && npm start`; `npm run build` always builds.
 *
 *   tsx scripts/build-dashboard.ts [--force]
 */
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DASHBOARD = join(ROOT, 'dashboard');
const STAMP = join(DASHBOARD, 'dist', '.inputs-sha256');
const INPUTS = ['dashboard/src', 'dashboard/index.html', 'dashboard/vite.config.ts', 'dashboard/package.json', 'contract/src', 'sdk/src/receipt.ts', 'sdk/src/errors.ts'];

function files(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => files(join(path, name)));
}

export function dashboardInputsHash(): string {
  const h = createHash('sha256');
  for (const f of INPUTS.flatMap((p) => files(join(ROOT, p)))) h.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex');
}

/** Builds unless dist/ was built from exactly these inputs; returns whether it built. */
export async function ensureDashboardBuilt(opts: { force?: boolean } = {}): Promise<boolean> {
  const hash = dashboardInputsHash();
  if (!opts.force && existsSync(join(DASHBOARD, 'dist', 'index.html')) && existsSync(STAMP) && readFileSync(STAMP, 'utf8') === hash) return false;
  const { build } = await import('vite');
  await build({ root: DASHBOARD, configFile: join(DASHBOARD, 'vite.config.ts'), logLevel: 'warn' });
  writeFileSync(STAMP, hash);
  return true;
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  const built = await ensureDashboardBuilt({ force: process.argv.includes('--force') });
  console.log(built ? `dashboard built in ${((Date.now() - started) / 1000).toFixed(1)} s` : 'dashboard up to date');
}
