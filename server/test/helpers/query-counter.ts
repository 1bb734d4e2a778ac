import pg from 'pg';
import type { Orm } from '../../src/db/orm.js';

/**
 * The SQL statements one ORM's database connection sends while counting, BEGIN and COMMIT
 * included: what the server receives, whichever layer (MikroORM, Kysely, pg-boss through the
 * ORM's Kysely) sent it. `statements` keeps each statement's first 80 characters, in order.
 */
export type QueryCounter = {
  readonly count: number;
  readonly statements: readonly string[];
  /** Forgets what was counted so far and keeps counting. */
  reset(): void;
  /** Stops counting and removes the wrappers. */
  stop(): void;
};

/** A PGlite instance or transaction, as far as counting needs it. */
type PgliteQueries = {
  query: (...args: any[]) => Promise<unknown>;
  exec: (...args: any[]) => Promise<unknown>;
  sql?: (...args: any[]) => Promise<unknown>;
};
type PgliteInstance = PgliteQueries & { transaction: (cb: (tx: PgliteQueries & { rollback: () => Promise<void> }) => Promise<unknown>) => Promise<unknown> };

const text = (q: unknown) => (typeof q === 'string' ? q : Array.isArray(q) ? q.join('?') : ((q as { text?: string })?.text ?? String(q))).trim().replace(/\s+/g, ' ').slice(0, 80);

/**
 * Counts on PostgreSQL (node-pg: every `query()` of a client the ORM's pool lends out, so
 * other pools in the process are not counted) and on embedded PGlite (the instance's
 * `query`/`exec`, and inside `transaction()` its BEGIN, its statements and its COMMIT or
 * ROLLBACK, which PGlite sends itself).
 */
export async function countQueries(orm: Orm): Promise<QueryCounter> {
  const statements: string[] = [];
  const note = (q: unknown) => statements.push(text(q));
  const native = await orm.em.getConnection().getNativeClient();
  let stop: () => void;

  if (native instanceof pg.Pool) {
    const pool = native;
    // Each lent client's own `query` is wrapped (db/sql.ts gives every connection its own
    // `query`, for named prepared statements), and restored when counting stops.
    const wrapped = new Map<pg.PoolClient, pg.PoolClient['query']>();
    const onAcquire = (client: pg.PoolClient) => {
      if (wrapped.has(client)) return;
      const own = client.query;
      wrapped.set(client, own);
      client.query = function (this: pg.PoolClient, ...args: unknown[]) {
        note(args[0]);
        return (own as (...a: unknown[]) => unknown).apply(client, args);
      } as pg.PoolClient['query'];
    };
    pool.on('acquire', onAcquire);
    stop = () => {
      pool.off('acquire', onAcquire);
      for (const [client, own] of wrapped) client.query = own;
    };
  } else {
    const db = native as PgliteInstance;
    const original = { query: db.query, exec: db.exec, transaction: db.transaction };
    const counted = <F extends (...args: any[]) => Promise<unknown>>(fn: F, self: unknown) =>
      ((...args: unknown[]) => {
        note(args[0]);
        return fn.apply(self, args);
      }) as F;
    db.query = counted(original.query, db);
    db.exec = counted(original.exec, db);
    db.transaction = (cb) =>
      original.transaction.call(db, async (tx) => {
        note('BEGIN');
        let rolledBack = false;
        const wrapped = Object.create(tx) as typeof tx;
        wrapped.query = counted(tx.query, tx);
        wrapped.exec = counted(tx.exec, tx);
        if (tx.sql) wrapped.sql = counted(tx.sql, tx);
        wrapped.rollback = async () => {
          rolledBack = true;
          note('ROLLBACK');
          return tx.rollback();
        };
        try {
          const result = await cb(wrapped);
          if (!rolledBack) note('COMMIT');
          return result;
        } catch (err) {
          if (!rolledBack) note('ROLLBACK');
          throw err;
        }
      });
    // the wrappers are own properties shadowing PGlite's methods: deleting them restores those
    stop = () => {
      for (const k of ['query', 'exec', 'transaction'] as const) delete (db as Partial<PgliteInstance>)[k];
    };
  }

  return {
    get count() {
      return statements.length;
    },
    statements,
    reset: () => void statements.splice(0),
    stop,
  };
}
