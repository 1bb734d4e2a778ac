import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Em } from '../../src/db/orm.js';
import { openOrm, type DbTarget } from '../../src/db/orm.js';
import { createScratchDatabase } from '../../src/db/scratch.js';
import { entities } from '../../src/entities.js';

/**
 * A database as an older version of the code left it, for a migration's test: a scratch
 * PostgreSQL database (under DATABASE_URL) or a PGlite directory of its own, migrated up to
 * `before` (inclusive) and filled by `fill` with SQL as the old code wrote it. The app started
 * on `target` runs the remaining migrations; `drop` removes the database after the test.
 */
export async function legacyDatabase(before: string, fill: (em: Em) => Promise<void>): Promise<{ target: DbTarget; drop: () => Promise<void> }> {
  let target: DbTarget;
  let drop: () => Promise<void>;
  if (process.env.DATABASE_URL) {
    const scratch = await createScratchDatabase(process.env.DATABASE_URL, 'svc_t');
    target = scratch.target;
    drop = scratch.drop;
  } else {
    const dir = mkdtempSync(join(tmpdir(), 'svc-migration-'));
    target = { kind: 'pglite', dataDir: dir, template: false };
    drop = async () => rmSync(dir, { recursive: true, force: true });
  }
  const orm = await openOrm(target, entities);
  try {
    await orm.migrator.up({ to: before });
    await fill(orm.em.fork());
  } finally {
    await orm.close(true);
  }
  return { target, drop };
}

/** The target a TestApp starts on to open a legacy database (PGlite: its directory, never the template). */
export const appTargetOf = (target: DbTarget): DbTarget => (target.kind === 'pglite' ? { kind: 'pglite', dataDir: target.dataDir } : target);
