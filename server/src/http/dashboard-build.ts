import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { setPriority } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from '../lib/logger.js';

/** The repository root (this file is server/src/http/ in a checkout). */
const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const DASHBOARD_DIR = join(ROOT, 'dashboard');
export const DASHBOARD_STAMP = join(DASHBOARD_DIR, 'dist', '.inputs-sha256');
const INPUTS = ['dashboard/src', 'dashboard/index.html', 'dashboard/vite.config.ts', 'dashboard/package.json', 'contract/src', 'sdk/src/receipt.ts', 'sdk/src/errors.ts'];

function files(path: string): string[] {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path)
    .sort()
    .flatMap((name) => files(join(path, name)));
}

/** SHA-256 over the dashboard build's inputs: the app's sources, its Vite config and package, and the contract and receipt verifier it imports. */
export function dashboardInputsHash(): string {
  const h = createHash('sha256');
  for (const f of INPUTS.flatMap((p) => files(join(ROOT, p)))) h.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
  return h.digest('hex');
}

/** Whether dashboard/dist was built from exactly these inputs (false in a deployment without the sources). */
export function dashboardIsStale(hash = dashboardInputsHash()): boolean {
  if (!existsSync(join(DASHBOARD_DIR, 'src'))) return false;
  return !(existsSync(join(DASHBOARD_DIR, 'dist', 'index.html')) && existsSync(DASHBOARD_STAMP) && readFileSync(DASHBOARD_STAMP, 'utf8') === hash);
}

let building = false;

/** True while a build started by `buildDashboardInBackground` runs: the dashboard's pages answer "being built". */
export function dashboardBuilding(): boolean {
  return building;
}

/**
 * `npm start` (outside production): when dashboard/dist is missing or older than its inputs,
 * build it in a child process (scripts/build-dashboard.ts) while the server starts and serves
 * the API, instead of making the start wait for Vite. The child ends with this process.
 * Resolves with whether the build succeeded; null when nothing was started.
 */
export function buildDashboardInBackground(
  log: Logger,
  /** For tests: build even when fresh, and the child's arguments (after this Node) instead of the build script. */
  opts: { force?: boolean; argv?: string[] } = {},
): Promise<boolean> | null {
  if (building || (!opts.force && !dashboardIsStale())) return null;
  building = true;
  const started = Date.now();
  log.info('building the dashboard in the background (dashboard/dist is missing or stale); its pages answer 503 until it is done');
  const child = spawn(process.execPath, opts.argv ?? ['--import', 'tsx', join(ROOT, 'scripts', 'build-dashboard.ts')], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'] });
  // the server's own start comes first: Vite gets what CPU is left
  try {
    if (child.pid) setPriority(child.pid, 10);
  } catch {
    /* not permitted here: build at normal priority */
  }
  let stderr = '';
  child.stderr!.on('data', (b: Buffer) => (stderr = (stderr + b.toString()).slice(-2000)));
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  return new Promise((resolve) => {
    child.once('exit', (code) => {
      building = false;
      process.removeListener('exit', kill);
      if (code === 0) log.info({ ms: Date.now() - started }, 'dashboard built');
      else log.warn({ code, stderr: stderr.trim().slice(-500) }, 'dashboard build failed: run `npm run build:dashboard` to see why');
      resolve(code === 0);
    });
  });
}
