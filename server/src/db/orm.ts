import { mkdirSync } from 'node:fs';
import { resolve } from 'node:path';
import { MikroORM as PgOrm } from '@mikro-orm/postgresql';
import { MikroORM as PgliteOrm } from '@mikro-orm/pglite';
import { Migrator } from '@mikro-orm/migrations';
import type { EntityManager as SqlEntityManager, MikroORM as SqlOrm } from '@mikro-orm/sql';
import { entities } from './entities.js';
import { migrationsList } from '../migrations/index.js';
import type { Logger } from '../lib/logger.js';

export type Orm = SqlOrm;
export type Em = SqlEntityManager;

export type DbTarget =
  | { kind: 'postgres'; url: string; poolMax?: number }
  | { kind: 'pglite'; dataDir: string | null /* null: in memory */ };

/** Opens the ORM on PostgreSQL or embedded PGlite with the same entities and migrations. */
export async function openOrm(target: DbTarget, log?: Logger): Promise<Orm> {
  const common = {
    entities,
    extensions: [Migrator],
    migrations: { migrationsList, transactional: true, allOrNothing: true, snapshot: false },
    debug: false,
    logger: (message: string) => log?.debug({ orm: true }, message),
    allowGlobalContext: false,
    forceUtcTimezone: true,
  };
  if (target.kind === 'postgres') {
    return (await PgOrm.init({
      ...common,
      clientUrl: target.url,
      pool: { min: 0, max: target.poolMax ?? 10, idleTimeoutMillis: 10_000 },
    })) as unknown as Orm;
  }
  let dbName = 'memory://';
  if (target.dataDir) {
    const dir = resolve(target.dataDir, 'pglite');
    mkdirSync(dir, { recursive: true });
    dbName = dir;
  }
  return (await PgliteOrm.init({ ...common, dbName })) as unknown as Orm;
}

export async function migrate(orm: Orm): Promise<void> {
  await orm.migrator.up();
}
