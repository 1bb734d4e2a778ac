import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestApp, type TestKey } from '../../server/test/helpers/harness.js';
import { startWebhookWorker, type WebhookWorker } from '../../server/src/modules/webhooks/worker.js';
import { packPackages, TSC } from '../../server/test/helpers/build.js';
import { runCommand, type Run } from '../../server/test/helpers/spawn.js';

/**
 * The packages as a user gets them: the tarballs `npm run pack:sdk` makes (@svc/contract,
 * @svc/sdk, and @svc/mcp, whose svc-mcp bin mcp-buyer.test.ts runs), checked with
 * publint and attw, installed into a fresh `npm init -y` project outside the workspace together
 * with the registry's current viem and zod (zod 4: the SDK's own zod 3 is a dependency, not a
 * peer), compiled there with plain tsc (nodenext and bundler, strict and
 * exactOptionalPropertyTypes; nodenext with skipLibCheck off, so our .d.ts are checked under
 * the consumer's flags), then run with plain node (the project's
 * Node 22 and Node 20 from npm's node-<platform>-<arch> package) against a real server:
 * configure a merchant, buy with the agent SDK, verify the receipt and the webhook; and a
 * CommonJS buyer (require) buys from that merchant.
 */

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const NODE20_VERSION = '20.20.2';
const NODE20_DIR = join(ROOT, 'node_modules/.cache/svc-node20');
const NODE20 = join(NODE20_DIR, `node_modules/node-${process.platform}-${process.arch}/bin/node`);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];


const run = (cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}) =>
  runCommand(cmd, args, { timeoutMs: 600_000, ...opts });

function ok(r: Run, what: string): Run {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

const work = mkdtempSync(join(tmpdir(), 'svc-packages-'));
let tarballs: Awaited<ReturnType<typeof packPackages>>;
const consumer = join(work, 'consumer');
let app: TestApp;
let key: TestKey;
let worker: WebhookWorker;
let merchantId = '';

async function node20(): Promise<string> {
  if (!existsSync(NODE20)) {
    mkdirSync(NODE20_DIR, { recursive: true });
    writeFileSync(join(NODE20_DIR, 'package.json'), '{"private":true}\n');
    ok(await run(NPM, ['install', ...NPM_QUIET, '--ignore-scripts', '--no-save', `node-${process.platform}-${process.arch}@${NODE20_VERSION}`], { cwd: NODE20_DIR }), 'npm install node 20');
  }
  return NODE20;
}

const t0 = Date.now();
const phase = (what: string) => process.stderr.write(`[packages] ${what} at ${((Date.now() - t0) / 1000).toFixed(1)} s\n`);

beforeAll(async () => {
  // The tarballs carry dist/ (ES modules and CommonJS), built the way `npm run build` does.
  tarballs = await packPackages(work);
  phase('built and packed');

  mkdirSync(consumer);
  ok(await run(NPM, ['init', '-y', '--loglevel=error'], { cwd: consumer }), 'npm init -y');
  for (const f of ['main.mts', 'buyer.cts', 'tsconfig.nodenext.json', 'tsconfig.bundler.json']) copyFileSync(join(ROOT, 'sdk/test/consumer', f), join(consumer, f));
  const [install] = await Promise.all([
    // The registry's current viem and zod, unpinned as a user types them (`latest`: zod 4).
    run(NPM, ['install', ...NPM_QUIET, tarballs.contract, tarballs.sdk, 'viem@latest', 'zod@latest', '@types/node@^22'], { cwd: consumer }),
    node20(),
    (async () => {
      app = await TestApp.start();
      key = await app.key('test');
      worker = startWebhookWorker(app.services, { pollIntervalMs: 50 });
    })(),
  ]);
  ok(install, 'npm install in the consumer project');
  phase('installed, node 20 ready, server up');
}, 900_000);

afterAll(async () => {
  await worker?.stop();
  await app?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe('published packages', () => {
  it('GIVEN the tarballs THEN they hold the built JavaScript, declarations, maps, README and LICENSE, and nothing that needs the monorepo', async () => {
    for (const [name, tgz] of Object.entries(tarballs)) {
      const files = ok(await run('tar', ['-tzf', tgz]), `tar ${name}`).stdout.split('\n').filter(Boolean).map((f) => f.replace(/^package\//, ''));
      expect(files, name).toEqual(expect.arrayContaining(['package.json', 'README.md', 'LICENSE', 'dist/index.js', 'dist/index.d.ts', 'dist/index.d.ts.map']));
      // The libraries ship CommonJS beside the ES modules; svc-mcp is an ES-module program.
      if (name !== 'mcp') expect(files, name).toEqual(expect.arrayContaining(['dist/cjs/package.json', 'dist/cjs/index.js', 'dist/cjs/index.d.ts']));
      expect(files.filter((f) => f.includes('tsconfig')), name).toEqual([]);
      expect(files.filter((f) => f.includes('test/')), name).toEqual([]);
    }
    const installed = join(consumer, 'node_modules/@svc/sdk');
    const pkg = (await import(join(installed, 'package.json'), { with: { type: 'json' } })).default as Record<string, unknown>;
    expect(pkg.private).toBeUndefined();
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.sideEffects).toBe(false);
    expect(Object.keys(pkg.exports as object)).toEqual(['.', './merchant', './agent', './webhooks', './package.json']);
    // viem is a peer (the consumer's account is the type the SDK takes); zod is the SDK's own.
    expect(pkg.peerDependencies).toEqual({ viem: expect.stringMatching(/^\^2\./) });
    expect((pkg.dependencies as Record<string, string>).zod).toMatch(/^\^3\./);
    for (const d of Object.values({ ...(pkg.dependencies as object), ...(pkg.peerDependencies as object) }) as string[]) expect(d).toMatch(/^\^/);
    for (const sub of ['index', 'merchant', 'agent', 'webhooks']) expect(readdirSync(join(installed, 'dist'))).toContain(`${sub}.d.ts`);

    // @svc/mcp: the svc-mcp bin, runnable by npx with its dependencies (not peers)
    const mcpFiles = ok(await run('tar', ['-tzf', tarballs.mcp]), 'tar mcp').stdout;
    expect(mcpFiles).toContain('package/dist/bin.js');
    const mcpPkg = JSON.parse(ok(await run('tar', ['-xzOf', tarballs.mcp, 'package/package.json']), 'tar mcp package.json').stdout) as Record<string, any>;
    expect(mcpPkg.bin).toEqual({ 'svc-mcp': './dist/bin.js' });
    expect(Object.keys(mcpPkg.dependencies).sort()).toEqual(['@modelcontextprotocol/sdk', '@svc/contract', '@svc/sdk', 'viem', 'zod']);
    for (const d of Object.values(mcpPkg.dependencies) as string[]) expect(d).toMatch(/^\^/);
    expect(ok(await run('tar', ['-xzOf', tarballs.mcp, 'package/dist/bin.js']), 'tar mcp bin').stdout.startsWith('#!/usr/bin/env node\n')).toBe(true);
  });

  it('GIVEN the three tarballs THEN publint (strict) and attw report no problem: every resolution for @svc/contract and @svc/sdk, the ESM-only profile for svc-mcp', async () => {
    for (const [name, tgz] of Object.entries(tarballs)) {
      const lint = await run(process.execPath, [join(ROOT, 'node_modules/publint/src/cli.js'), 'run', '--strict', tgz]);
      expect(lint.code, lint.stdout + lint.stderr).toBe(0);
      expect(lint.stdout).toContain('All good!');
      const profile = name === 'mcp' ? ['--profile', 'esm-only'] : [];
      const attw = await run(process.execPath, [join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), ...profile, '--no-color', tgz]);
      expect(attw.code, attw.stdout + attw.stderr).toBe(0);
      const problems = attw.stdout.split('\n').filter((l) => /💀|❌|⚠️|🥴|🐛|❗️|🚭|🎭/.test(l));
      if (name === 'mcp') {
        // svc-mcp is ES modules only: CommonJS resolutions are ignored, nothing else may fail.
        expect(attw.stdout).toContain("(ignoring resolutions: 'node10', 'node16-cjs')");
        expect(problems.filter((l) => !l.includes('ignored'))).toEqual([]);
      } else {
        expect(attw.stdout, name).toContain('No problems found');
        for (const resolution of ['node10', 'node16 (from CJS)', 'node16 (from ESM)', 'bundler']) expect(attw.stdout, `${name} ${resolution}`).toContain(resolution);
        expect(problems, name).toEqual([]);
      }
    }
  }, 300_000);

  it('GIVEN a fresh npm init -y project WHEN the tarballs are installed with the current viem and zod from the registry THEN the project has zod 4 and the SDK its own zod 3', async () => {
    const version = (dir: string) => (JSON.parse(readFileSync(join(consumer, 'node_modules', dir, 'package.json'), 'utf8')) as { version: string }).version;
    const project = JSON.parse(readFileSync(join(consumer, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    expect(Object.keys(project.dependencies).sort()).toEqual(['@svc/contract', '@svc/sdk', '@types/node', 'viem', 'zod']);
    expect(version('zod')).toMatch(/^4\./);
    // npm nests zod 3 where the contract, the SDK and ts-rest need it (no peer conflict, no ERESOLVE).
    const nested = ['@svc/contract', '@svc/sdk'].map((p) => join(p, 'node_modules/zod')).filter((d) => existsSync(join(consumer, 'node_modules', d)));
    expect(nested.length).toBeGreaterThan(0);
    for (const d of nested) expect(version(d)).toMatch(/^3\./);
  });

  it('GIVEN a consumer project THEN plain tsc compiles it under nodenext and bundler with strict and exactOptionalPropertyTypes (and the @ts-expect-error lines are errors)', async () => {
    const [nodenext, bundler] = await Promise.all([
      run(process.execPath, [TSC, '-p', 'tsconfig.nodenext.json'], { cwd: consumer }),
      run(process.execPath, [TSC, '-p', 'tsconfig.bundler.json'], { cwd: consumer }),
    ]);
    expect(nodenext.code, nodenext.stdout).toBe(0);
    expect(bundler.code, bundler.stdout).toBe(0);
  }, 600_000);

  it('GIVEN the compiled consumer WHEN run with plain node 22 and node 20 against a server THEN it configures a merchant, buys, verifies the receipt and the order.settled webhook', async () => {
    const env = { SVC_BASE_URL: app.baseUrl, SVC_API_KEY: key.secret, NODE_OPTIONS: '' };
    const runs = await Promise.all([
      run(process.execPath, ['out-nodenext/main.mjs'], { cwd: consumer, env }),
      run(NODE20, ['out-nodenext/main.mjs'], { cwd: consumer, env }),
      run(process.execPath, ['out-bundler/main.mjs'], { cwd: consumer, env }),
    ]);
    const versions: string[] = [];
    for (const r of runs) {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
      expect(out).toMatchObject({
        skus: ['espresso'],
        status: 'accepted',
        typedError: 'PRICE_AMOUNT_INVALID',
        webhook: { ok: true, type: 'order.settled' },
        exports: ['MerchantClient', 'AgentClient', 'verifyWebhook', 'verifyReceipt'],
      });
      expect(out.order).toMatch(/^ord_/);
      expect(out.receiptOrder).toBe(out.order);
      expect(out.offlineOrder).toBe(out.order);
      expect(out.reasonCodes).toBeGreaterThan(10);
      versions.push(out.node);
      merchantId = out.merchant;
    }
    expect(versions[0]).toBe(process.version);
    expect(versions[0]).toMatch(/^v22\./);
    expect(versions[1]).toBe(`v${NODE20_VERSION}`);
  }, 300_000);

  it('GIVEN the compiled CommonJS buyer WHEN run with plain node 22 and node 20 THEN require() loads the CommonJS builds and it buys and verifies the receipt', async () => {
    expect(merchantId).toMatch(/^mrch_/);
    const env = { SVC_SHOP_URL: `${app.baseUrl}/m/${merchantId}/`, NODE_OPTIONS: '' };
    const runs = await Promise.all([run(process.execPath, ['out-nodenext/buyer.cjs'], { cwd: consumer, env }), run(NODE20, ['out-nodenext/buyer.cjs'], { cwd: consumer, env })]);
    for (const r of runs) {
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const out = JSON.parse(r.stdout.trim().split('\n').at(-1)!);
      expect(out).toMatchObject({ commonjs: true, status: 'accepted' });
      expect(out.sdk).toBe(join(consumer, 'node_modules/@svc/sdk/dist/cjs/agent.js'));
      expect(out.contract).toBe(join(consumer, 'node_modules/@svc/contract/dist/cjs/index.js'));
      expect(out.order).toMatch(/^ord_/);
      expect(out.receiptOrder).toBe(out.order);
      expect(out.reasonCodes).toBeGreaterThan(10);
    }
    expect(runs.map((r) => JSON.parse(r.stdout.trim().split('\n').at(-1)!).node)).toEqual([process.version, `v${NODE20_VERSION}`]);
  }, 300_000);
});
