/**
 * `npm run check:packages`: builds and packs @svc/contract, @svc/sdk and @svc/mcp (as `npm run
 * pack:sdk` does) and runs publint (strict) and attw on the tarballs, as sdk/test/packages.test.ts
 * does: @svc/contract and @svc/sdk ship ES modules and CommonJS, so attw checks every resolution
 * (node10, node16 from CommonJS and from ESM, bundler); @svc/mcp is an ES-module program with a
 * bin, checked with attw's ESM-only profile.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { packPackages, ROOT } from '../server/test/helpers/build.js';

const dir = mkdtempSync(join(tmpdir(), 'svc-check-'));
let failed = false;
try {
  const tarballs = await packPackages(dir);
  for (const [pkg, tgz] of Object.entries(tarballs)) {
    for (const [cmd, args] of [
      ['node_modules/publint/src/cli.js', ['run', '--strict', tgz]],
      ['node_modules/@arethetypeswrong/cli/dist/index.js', pkg === 'mcp' ? ['--profile', 'esm-only', tgz] : [tgz]],
    ] as const) {
      const r = spawnSync(process.execPath, [join(ROOT, cmd), ...args], { cwd: ROOT, stdio: 'inherit' });
      if (r.status !== 0) failed = true;
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
