import type { Orm } from './orm.js';
import { BareTx } from './sql.js';

type Rows = Array<Record<string, unknown>>;
type PgClient = { query: (text: string, values: unknown[]) => Promise<{ rows: Rows }>; release: (destroy?: boolean) => void };
type PgPool = { connect: () => Promise<PgClient> };
type Pglite = { transaction: <T>(fn: (tx: { query: (text: string, params: unknown[]) => Promise<{ rows: Rows }> }) => Promise<T>) => Promise<T> };

/**
 * `fn` in one transaction on a bare connection of the ORM's database, with no unit of work and no
 * query builder: the settle hot path's (docs/settlement.md, "Statement budget"). On PostgreSQL a
 * client of MikroORM's own `pg` pool (so the pool size, the named prepared statements of
 * db/prepared-statements.ts and the request's database budget of db/request-budget.ts all apply
 * as to the ORM's statements) between BEGIN and COMMIT, ROLLBACK when `fn` throws; on embedded
 * PGlite its own transaction (the one session; transactions take turns). Errors come out as
 * MikroORM's exceptions, as from `runSql`. Nothing in `fn` may use the ORM's connection: on PGlite
 * it would wait for this transaction.
 */
export async function bareTransaction<T>(orm: Orm, fn: (tx: BareTx) => Promise<T>): Promise<T> {
  const { em } = orm; // its connection and driver only: no unit of work, so no request's fork
  // The driver's errors come out as MikroORM's exceptions (as from `runSql`); `fn`'s own as they are.
  const driver = <R>(work: Promise<R>) => work.catch((err: unknown) => Promise.reject(em.getDriver().convertException(err as Error)));
  // MikroORM's connection type does not declare the driver's native client (pg.Pool, or the PGlite instance).
  const native = await driver((em.getConnection() as unknown as { getNativeClient: () => Promise<PgPool | Pglite> }).getNativeClient());
  if ('transaction' in native) return native.transaction((tx) => fn(new BareTx(async (st) => (await driver(tx.query(st.text, st.params))).rows)));
  return onPool(native, driver, fn);
}

async function onPool<T>(pool: PgPool, driver: <R>(work: Promise<R>) => Promise<R>, fn: (tx: BareTx) => Promise<T>): Promise<T> {
  const client = await driver(pool.connect());
  let broken = false;
  try {
    await driver(client.query('begin', []));
    // sent with values, so the pool's connection prepares it once under its name (db/prepared-statements.ts)
    const out = await fn(new BareTx(async (st) => (await driver(client.query(st.text, st.params))).rows));
    await driver(client.query('commit', []));
    return out;
  } catch (err) {
    await client.query('rollback', []).catch(() => {
      broken = true; // a connection whose rollback failed is not handed out again
    });
    throw err;
  } finally {
    client.release(broken);
  }
}
