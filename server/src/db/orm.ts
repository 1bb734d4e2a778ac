import { mkdirSync, readdirSync, readFileSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { MikroORM as PgOrm } from '@mikro-orm/postgresql';
import { MikroORM as PgliteOrm } from '@mikro-orm/pglite';
import { Migrator } from '@mikro-orm/migrations';
import type { Options } from '@mikro-orm/core';
import type { EntityManager as SqlEntityManager, MikroORM as SqlOrm } from '@mikro-orm/sql';
import { migrationsList } from '../migrations/index.js';
import { PreparedStatementNames } from './prepared-statements.js';
import { readPgliteTemplate } from './pglite-template.js';
import type { RequestDbBudget } from './request-budget.js';
import type { Logger } from '../lib/logger.js';

export type Orm = SqlOrm;
export type Em = SqlEntityManager;
/** The entity list an ORM maps (the app layer's `entities`, src/entities.ts). */
export type OrmEntities = Options['entities'];

export type DbTarget =
  | { kind: 'postgres'; url: string; poolMax?: number }
  | {
      kind: 'pglite';
      dataDir: string | null /* null: in memory */;
      /** A fresh database is unpacked from the install-time template (db/pglite-template.ts) at this path, the default one when unset, or never (false). */
      template?: string | false;
    };

/** How an embedded database was opened: an existing one, unpacked from the template, or made by initdb. */
export type PgliteOrigin = 'existing' | 'template' | 'initdb';
const pgliteOrigins = new WeakMap<Orm, PgliteOrigin>();
/** How `orm` was opened, for an embedded database (undefined on PostgreSQL). */
export function pgliteOrigin(orm: Orm): PgliteOrigin | undefined {
  return pgliteOrigins.get(orm);
}

/**
 * How long PostgreSQL may take before a request gives up with 503 DATABASE_UNAVAILABLE
 * rather than hang: `statementMs` bounds each statement on the server (statement_timeout,
 * lock waits included) and, with a margin, on the client (query_timeout, for a server that
 * stopped answering at all); `connectMs` bounds opening a connection and waiting for a free
 * one in the pool. A transaction left idle for long is ended by the server. An HTTP request
 * also has a total for all of these together (`requests`, SVC_DB_REQUEST_TIMEOUT_MS). PGlite
 * runs in process and has none of these.
 */
export type DbTimeouts = {
  statementMs: number;
  connectMs: number;
  /** The per-request total (db/request-budget.ts), applied to the pool; none when absent. */
  requests?: RequestDbBudget;
};
export const DEFAULT_DB_TIMEOUTS: DbTimeouts = { statementMs: 5000, connectMs: 5000 };

/** The `pg` client and pool options for the timeouts above. */
export function pgTimeoutOptions(t: DbTimeouts) {
  return {
    connectionTimeoutMillis: t.connectMs,
    statement_timeout: t.statementMs,
    query_timeout: t.statementMs + 2000,
    idle_in_transaction_session_timeout: Math.max(30_000, t.statementMs * 6),
  };
}

/**
 * Opens the ORM on PostgreSQL or embedded PGlite with the same entities and migrations. The
 * entities come from the caller (the app layer's list, src/entities.ts): this layer imports no module.
 */
export async function openOrm(target: DbTarget, entities: OrmEntities, log?: Logger, timeouts: DbTimeouts = DEFAULT_DB_TIMEOUTS): Promise<Orm> {
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
    const statementNames = new PreparedStatementNames();
    return (await PgOrm.init({
      ...common,
      clientUrl: target.url,
      pool: { min: 0, max: target.poolMax ?? 10, idleTimeoutMillis: 10_000 },
      // Statements sent with values (db/sql.ts runSql) run as named prepared statements; the names belong to this ORM.
      driverOptions: {
        ...pgTimeoutOptions(timeouts),
        onPoolCreated: (pool: Parameters<PreparedStatementNames['install']>[0] & Parameters<RequestDbBudget['install']>[0]) => {
          statementNames.install(pool);
          timeouts.requests?.install(pool);
        },
      },
    })) satisfies Orm;
  }
  let dbName = 'memory://';
  let release = () => {};
  let dir: string | null = null;
  if (target.dataDir) {
    dir = resolve(target.dataDir, 'pglite');
    mkdirSync(dir, { recursive: true });
    release = lockDataDir(dir);
    dbName = dir;
  }
  // A new database (in memory, or an empty directory) starts from the template when one matches.
  const fresh = !dir || readdirSync(dir).length === 0;
  const damaged = (err: unknown) =>
    log?.warn({ err: (err as Error).message }, 'the embedded database template is damaged: creating the database with initdb and the migrations instead');
  let template: Blob | null = null;
  if (fresh && target.template !== false) template = await readPgliteTemplate(target.template).catch((err: unknown) => (damaged(err), null));
  const init = async (loadDataDir: Blob | null) => {
    // driverOptions as a function: MikroORM copies option objects, which breaks a Blob; the template
    // unpacks on the first connection only (a reconnect opens what is there).
    let pending = loadDataDir;
    const opened = (await PgliteOrm.init({
      ...common,
      dbName,
      driverOptions: () => {
        const options = pending ? { loadDataDir: pending } : {};
        pending = null;
        return options;
      },
    })) satisfies Orm;
    try {
      await opened.em.fork().execute('select 1'); // PGlite starts (and unpacks) on the first statement
    } catch (err) {
      await opened.close(true).catch(() => undefined);
      throw err;
    }
    return opened;
  };
  let orm: Orm;
  let origin: PgliteOrigin = fresh ? 'initdb' : 'existing';
  try {
    if (template) {
      try {
        orm = await init(template);
        origin = 'template';
      } catch (err) {
        damaged(err);
        if (dir) {
          rmSync(dir, { recursive: true, force: true });
          mkdirSync(dir, { recursive: true });
        }
        orm = await init(null);
      }
    } else {
      orm = await init(null);
    }
  } catch (err) {
    release();
    throw err;
  }
  pgliteOrigins.set(orm, origin);
  if (dir && origin === 'template') log?.info({ data_dir: target.dataDir }, 'created the embedded database from the install-time template');
  if (dir && origin === 'initdb') {
    log?.info({ data_dir: target.dataDir }, 'created the embedded database with initdb (no install-time template for these migrations: `npm ci` or `tsx scripts/pglite-template.ts` makes one)');
  }
  const close = orm.close.bind(orm);
  orm.close = async (force?: boolean) => {
    try {
      await close(force);
    } finally {
      release();
    }
  };
  return orm;
}

export class DataDirInUseError extends Error {}

/**
 * Embedded PGlite is single-process: a second process opening the same directory would
 * silently lose writes. A pid file refuses that with a clear message instead.
 */
function lockDataDir(dir: string): () => void {
  const file = resolve(dir, '..', 'pglite.pid');
  try {
    writeFileSync(file, String(process.pid), { flag: 'wx' });
  } catch {
    const pid = Number(readFileSync(file, 'utf8').trim());
    const alive = Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid);
    if (alive) {
      throw new DataDirInUseError(
        `the embedded database in ${dir} is open in process ${pid}; stop that process first (or set DATABASE_URL to share a PostgreSQL database)`,
      );
    }
    writeFileSync(file, String(process.pid));
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    try {
      if (readFileSync(file, 'utf8').trim() === String(process.pid)) unlinkSync(file);
    } catch {
      /* already gone */
    }
  };
  process.once('exit', release);
  return release;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export async function migrate(orm: Orm): Promise<void> {
  await orm.migrator.up();
}

/** Readiness ping with its own timeout so a hung database cannot hang the probe. */
export async function pingDatabase(orm: Orm, timeoutMs: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<false>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    const ping = orm.em
      .fork()
      .execute('select 1 as ok')
      .then(() => true as const)
      .catch(() => false as const);
    return await Promise.race([ping, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
