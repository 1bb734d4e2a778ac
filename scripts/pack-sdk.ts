/**
 * `npm run pack:sdk`: builds @svc/contract, @svc/sdk and @svc/mcp and packs them into
 * dist-packages/ (gitignored), then prints the line that installs them in another project.
 * The packages are not on a registry: @svc/sdk needs @svc/contract from the same folder.
 */
import { rmSync } from 'node:fs';
import { join, relative } from 'node:path';
import { packPackages, ROOT } from '../server/test/helpers/build.js';

const dest = join(ROOT, 'dist-packages');
rmSync(dest, { recursive: true, force: true });
const tarballs = await packPackages(dest);
for (const tgz of Object.values(tarballs)) console.log(relative(ROOT, tgz));
console.log(`
In your project (npm init -y, or an existing one), install the SDK and its peer viem:
  npm install ${tarballs.contract} ${tarballs.sdk} viem
The agent's MCP server (svc-mcp), likewise with the two packages it needs:
  npm install ${tarballs.contract} ${tarballs.sdk} ${tarballs.mcp} && npx svc-mcp`);
