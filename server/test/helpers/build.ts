import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

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
  for (const f of [`${pkg}/tsconfig.build.json`, `${pkg}/package.json`, 'tsconfig.base.json']) h.update(f).update(readFileSync(join(ROOT, f)));
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
      // A lock older than five minutes belongs to a killed run.
      if (existsSync(dir) && Date.now() - statSync(dir).mtimeMs > 300_000) rmdirSync(dir);
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

function tsc(project: string): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(process.execPath, [TSC, '-p', project], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => (out += b));
    child.stderr.on('data', (b) => (out += b));
    child.on('error', fail);
    child.on('close', (code) => (code === 0 ? done() : fail(new Error(`tsc -p ${project} exited ${code}\n${out}`))));
  });
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
      await tsc(`${pkg}/tsconfig.build.json`);
      writeFileSync(stamp, hash);
    }
  } finally {
    release();
  }
}
