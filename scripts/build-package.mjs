#!/usr/bin/env node
// `npm run build` of a published package (run in its directory): tsc to ES modules in dist/ and,
// when the package has a tsconfig.cjs.json, tsc again to CommonJS in dist/cjs/ with a
// package.json that marks that folder CommonJS (as viem and stripe-node ship both).
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
for (const project of ['tsconfig.build.json', 'tsconfig.cjs.json']) {
  if (!existsSync(project)) continue;
  const r = spawnSync(process.execPath, [tsc, '-p', project], { stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
}
if (existsSync('tsconfig.cjs.json')) writeFileSync('dist/cjs/package.json', '{ "type": "commonjs" }\n');
