import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestApp, type TestKey } from '../../server/test/helpers/harness.js';
import { startWebhookWorker, type WebhookWorker } from '../../server/src/modules/webhooks/worker.js';
import { buildPackages } from '../../server/test/helpers/build.js';
import { runCommand, type Run } from '../../server/test/helpers/spawn.js';

/**
 * The packages as a user gets them: the tarballs packed with `npm pack` (@svc/contract,
 * @svc/sdk, and @svc/mcp, whose svc-mcp bin mcp-buyer.test.ts runs), checked with
 * publint and attw, installed with viem and zod into a throwaway project outside the
 * workspace, compiled there with plain tsc (nodenext and bundler, strict and
 * exactOptionalPropertyTypes; nodenext with skipLibCheck off, so our .d.ts are checked under
 * the consumer's flags), then run with plain node (the project's
 * Node 22 and Node 20 from npm's node-<platform>-<arch> package) against a real server:
 * configure a merchant, buy with the agent SDK, verify the receipt and the webhook.
 */

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const TSC = join(ROOT, 'node_modules/typescript/bin/tsc');
const NODE20_VERSION = '20.20.2';
const NODE20_DIR = join(ROOT, 'node_modules/.cache/svc-node20');
const NODE20 = join(NODE20_DIR, `node_modules/node-${process.platform}-${process.arch}/bin/node`);
const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];


const run = (cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}) =>
  runCommand(cmd, args, { timeoutMs: 180_000, ...opts });

function ok(r: Run, what: string): Run {
  if (r.code !== 0) throw new Error(`${what} exited ${r.code}\n${r.stdout}\n${r.stderr}`);
  return r;
}

const work = mkdtempSync(join(tmpdir(), 'svc-packages-'));
const tarballs = { contract: '', sdk: '', mcp: '' };
const consumer = join(work, 'consumer');
let app: TestApp;
let key: TestKey;
let worker: WebhookWorker;

async function pack(dir: string): Promise<string> {
  const r = ok(await run(NPM, ['pack', '--ignore-scripts', '--json', '--pack-destination', work, '--loglevel=error'], { cwd: join(ROOT, dir) }), `npm pack ${dir}`);
  const [info] = JSON.parse(r.stdout) as { filename: string }[];
  return join(work, info!.filename);
}

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
  // The tarballs carry dist/: built the way `npm run build` does (prepack is skipped above).
  await buildPackages(['contract', 'sdk', 'mcp']);
  phase('built');
  [tarballs.contract, tarballs.sdk, tarballs.mcp] = await Promise.all([pack('contract'), pack('sdk'), pack('mcp')]);
  phase('packed');

  mkdirSync(consumer);
  writeFileSync(join(consumer, 'package.json'), JSON.stringify({ name: 'svc-consumer', private: true, type: 'module' }, null, 2));
  for (const f of ['main.ts', 'tsconfig.nodenext.json', 'tsconfig.bundler.json']) copyFileSync(join(ROOT, 'sdk/test/consumer', f), join(consumer, f));
  const [install] = await Promise.all([
    run(NPM, ['install', ...NPM_QUIET, tarballs.contract, tarballs.sdk, 'viem@^2', 'zod@^3.25', '@types/node@^22'], { cwd: consumer }),
    node20(),
    (async () => {
      app = await TestApp.start();
      key = await app.key('test');
      worker = startWebhookWorker(app.services, { pollIntervalMs: 50 });
    })(),
  ]);
  ok(install, 'npm install in the consumer project');
  phase('installed, node 20 ready, server up');
}, 300_000);

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
      expect(files.filter((f) => f.includes('tsconfig')), name).toEqual([]);
      expect(files.filter((f) => f.includes('test/')), name).toEqual([]);
    }
    const installed = join(consumer, 'node_modules/@svc/sdk');
    const pkg = (await import(join(installed, 'package.json'), { with: { type: 'json' } })).default as Record<string, unknown>;
    expect(pkg.private).toBeUndefined();
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.sideEffects).toBe(false);
    expect(Object.keys(pkg.exports as object)).toEqual(['.', './merchant', './agent', './webhooks', './package.json']);
    expect(pkg.peerDependencies).toEqual({ viem: expect.stringMatching(/^\^2\./), zod: expect.stringMatching(/^\^3\./) });
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

  it('GIVEN the three tarballs THEN publint (strict) and attw (ESM-only profile) report no problem', async () => {
    for (const tgz of [tarballs.contract, tarballs.sdk, tarballs.mcp]) {
      const lint = await run(process.execPath, [join(ROOT, 'node_modules/publint/src/cli.js'), 'run', '--strict', tgz]);
      expect(lint.code, lint.stdout + lint.stderr).toBe(0);
      expect(lint.stdout).toContain('All good!');
      const attw = await run(process.execPath, [join(ROOT, 'node_modules/@arethetypeswrong/cli/dist/index.js'), '--profile', 'esm-only', '--no-color', tgz]);
      // Exit 0: no problem under the ESM-only profile (node16 from ESM, bundler). CommonJS
      // `require` (node10, node16-cjs) is out of scope: the packages are ESM only, as is jose.
      expect(attw.code, attw.stdout + attw.stderr).toBe(0);
      expect(attw.stdout).toContain("(ignoring resolutions: 'node10', 'node16-cjs')");
      const unignored = attw.stdout.split('\n').filter((l) => /💀|❌|⚠️/.test(l) && !l.includes('ignored'));
      expect(unignored).toEqual([]);
    }
  });

  it('GIVEN a consumer project THEN plain tsc compiles it under nodenext and bundler with strict and exactOptionalPropertyTypes (and the @ts-expect-error lines are errors)', async () => {
    const [nodenext, bundler] = await Promise.all([
      run(process.execPath, [TSC, '-p', 'tsconfig.nodenext.json'], { cwd: consumer }),
      run(process.execPath, [TSC, '-p', 'tsconfig.bundler.json'], { cwd: consumer }),
    ]);
    expect(nodenext.code, nodenext.stdout).toBe(0);
    expect(bundler.code, bundler.stdout).toBe(0);
  }, 180_000);

  it('GIVEN the compiled consumer WHEN run with plain node 22 and node 20 against a server THEN it configures a merchant, buys, verifies the receipt and the order.settled webhook', async () => {
    const env = { SVC_BASE_URL: app.baseUrl, SVC_API_KEY: key.secret, NODE_OPTIONS: '' };
    const runs = await Promise.all([
      run(process.execPath, ['out-nodenext/main.js'], { cwd: consumer, env }),
      run(NODE20, ['out-nodenext/main.js'], { cwd: consumer, env }),
      run(process.execPath, ['out-bundler/main.js'], { cwd: consumer, env }),
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
    }
    expect(versions[0]).toBe(process.version);
    expect(versions[0]).toMatch(/^v22\./);
    expect(versions[1]).toBe(`v${NODE20_VERSION}`);
  }, 120_000);
});
