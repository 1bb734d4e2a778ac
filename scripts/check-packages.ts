/**
 * `npm run check:packages`: builds @svc/contract, @svc/sdk and @svc/mcp, packs them and runs publint
 * (strict) and attw (ESM-only profile) on the tarballs, as sdk/test/packages.test.ts does.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildPackages, ROOT } from '../server/test/helpers/build.js';

await buildPackages(['contract', 'sdk', 'mcp']);
const dir = mkdtempSync(join(tmpdir(), 'svc-check-'));
let failed = false;
try {
  for (const pkg of ['contract', 'sdk', 'mcp']) {
    const packed = spawnSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', dir, '--loglevel=error'], { cwd: join(ROOT, pkg), encoding: 'utf8' });
    if (packed.status !== 0) throw new Error(`npm pack ${pkg}: ${packed.stderr}`);
    const tgz = join(dir, (JSON.parse(packed.stdout) as { filename: string }[])[0]!.filename);
    for (const [cmd, args] of [
      ['node_modules/publint/src/cli.js', ['run', '--strict', tgz]],
      ['node_modules/@arethetypeswrong/cli/dist/index.js', ['--profile', 'esm-only', tgz]],
    ] as const) {
      const r = spawnSync(process.execPath, [join(ROOT, cmd), ...args], { cwd: ROOT, stdio: 'inherit' });
      if (r.status !== 0) failed = true;
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
