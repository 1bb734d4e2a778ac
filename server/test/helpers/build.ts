import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCommand } from './spawn.js';

/** The repository root. */
export const ROOT = resolve(fileURLToPath(new URL('../../..', import.meta.url)));
export const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');

type Pkg = 'contract' | 'sdk' | 'mcp' | 'server';
const DEPS: Record<Pkg, Pkg[]> = { contract: [], sdk: ['contract'], mcp: ['contract', 'sdk'], server: ['contract'] };

function hashTree(h: ReturnType<typeof createHash>, dir: string) {
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) hashTree(h, p);
    else h.update(p).update(readFileSync(p));
  }
}

function sourceHash(pkg: Pkg): string {
  const h = createHash('sha256');
  hashTree(h, join(ROOT, pkg, 'src'));
  for (const f of [`${pkg}/tsconfig.build.json`, `${pkg}/tsconfig.cjs.json`, `${pkg}/package.json`, 'tsconfig.base.json', 'scripts/build-package.mjs']) {
    if (existsSync(join(ROOT, f))) h.update(f).update(readFileSync(join(ROOT, f)));
  }
  for (const dep of DEPS[pkg]) h.update(sourceHash(dep));
  return h.digest('hex');
}

async function lock(): Promise<() => void> {
  const dir = join(ROOT, 'node_modules/.cache/svc-build.lock');
  mkdirSync(join(ROOT, 'node_modules/.cache'), { recursive: true });
  for (;;) {
    try {
      mkdirSync(dir);
      return () => rmdirSync(dir);
    } catch {
      // A lock older than fifteen minutes belongs to a killed run (three packages built twice, ESM
      // and CommonJS, take minutes on a busy 2-core machine).
      if (existsSync(dir) && Date.now() - statSync(dir).mtimeMs > 900_000) rmdirSync(dir);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** The package's `npm run build`: scripts/build-package.mjs (ES modules, and CommonJS where it has a tsconfig.cjs.json). */
async function build(pkg: Pkg): Promise<void> {
  const r = await runCommand(process.execPath, [join(ROOT, 'scripts/build-package.mjs')], { cwd: join(ROOT, pkg), timeoutMs: 900_000 });
  if (r.code !== 0) throw new Error(`building ${pkg} exited ${r.code}\n${r.stdout}${r.stderr}`);
}

/**
 * `npm run build` for the given packages (and what they depend on), as tests need it: once per
 * source change (a stamp in node_modules/.cache holds the hash of the sources dist/ was built from), and one
 * build at a time across the test workers (a lock directory), so no test reads a dist/ that
 * another is rewriting.
 */
export async function buildPackages(pkgs: Pkg[]): Promise<void> {
  const order: Pkg[] = (['contract', 'sdk', 'mcp', 'server'] as const).filter((p) => pkgs.includes(p) || pkgs.some((q) => DEPS[q].includes(p)));
  const release = await lock();
  try {
    for (const pkg of order) {
      const stamp = join(ROOT, `node_modules/.cache/svc-build-${pkg}.stamp`);
      const hash = sourceHash(pkg);
      const entry = join(ROOT, pkg, pkg === 'server' ? 'dist/main.js' : 'dist/index.js');
      if (existsSync(entry) && existsSync(stamp) && readFileSync(stamp, 'utf8') === hash) continue;
      await build(pkg);
      writeFileSync(stamp, hash);
    }
  } finally {
    release();
  }
}

export type Published = 'contract' | 'sdk' | 'mcp';

/**
 * `npm run pack:sdk`: builds the published packages and packs each with `npm pack` into `dest`
 * (prepack skipped: they were just built). Returns the tarballs' paths by package.
 */
export async function packPackages(dest: string, pkgs: Published[] = ['contract', 'sdk', 'mcp']): Promise<Record<Published, string>> {
  await buildPackages(pkgs);
  mkdirSync(dest, { recursive: true });
  const packed = await Promise.all(
    pkgs.map(async (pkg) => {
      const r = await runCommand('npm', ['pack', '--ignore-scripts', '--json', '--loglevel=error', '--pack-destination', dest], { cwd: join(ROOT, pkg), timeoutMs: 300_000 });
      if (r.code !== 0) throw new Error(`npm pack ${pkg} exited ${r.code}\n${r.stderr}`);
      return join(dest, (JSON.parse(r.stdout) as { filename: string }[])[0]!.filename);
    }),
  );
  return Object.fromEntries(pkgs.map((pkg, i) => [pkg, packed[i]!])) as Record<Published, string>;
}
