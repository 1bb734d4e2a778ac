/**
 * Makes the embedded database's template (server/src/db/pglite-template.ts): an in-memory
 * PGlite with every committed migration applied, checkpointed and dumped as a gzipped data
 * directory under node_modules/.cache/svc-checkout/. `npm ci` runs it (scripts/postinstall.mjs)
 * and so does the test run's global setup; it does nothing when the template for the current
 * PGlite and migrations is already there.
 *
 *   tsx scripts/pglite-template.ts [--force]
 */
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { migrate, openOrm } from '../server/src/db/orm.js';
import { entities } from '../server/src/entities.js';
import { currentPgliteTemplatePath, writePgliteTemplate } from '../server/src/db/pglite-template.js';

type NativePglite = { query(sql: string): Promise<unknown>; dumpDataDir(compression: 'gzip'): Promise<Blob> };

/** Writes the template unless the current one exists; returns its path and whether it was made now (null: no template can be made here). */
export async function ensurePgliteTemplate(opts: { force?: boolean } = {}): Promise<{ path: string; made: boolean } | null> {
  const path = await currentPgliteTemplatePath();
  if (!path) return null;
  if (!opts.force && existsSync(path)) return { path, made: false };
  const orm = await openOrm({ kind: 'pglite', dataDir: null, template: false }, entities);
  try {
    await migrate(orm);
    const pglite = (await orm.em.getConnection().getNativeClient()) as NativePglite;
    await pglite.query('checkpoint');
    const dump = await pglite.dumpDataDir('gzip');
    writePgliteTemplate(path, new Uint8Array(await dump.arrayBuffer()));
  } finally {
    await orm.close(true);
  }
  return { path, made: true };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const started = Date.now();
  const made = await ensurePgliteTemplate({ force: process.argv.includes('--force') });
  console.log(
    !made
      ? 'no embedded database template: PGlite or a migration cannot be read here'
      : made.made
        ? `embedded database template written in ${((Date.now() - started) / 1000).toFixed(1)} s: ${made.path}`
        : `embedded database template up to date: ${made.path}`,
  );
}
