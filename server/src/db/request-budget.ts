import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The most one HTTP request may wait on PostgreSQL, in total (SVC_DB_REQUEST_TIMEOUT_MS):
 * waiting for a pooled connection, opening one, and every statement it runs count against it.
 * When it is spent the request fails with `DatabaseBudgetSpent`, which the error mapper answers
 * 503 DATABASE_UNAVAILABLE. A statement still running then has its connection closed: the
 * server rolls its transaction back (nothing half-done commits later) and the pool replaces it.
 * The statement, connect and pool timeouts (db/orm.ts) still bound work outside requests
 * (workers, start-up); a request gets whichever ends first. Only the time spent waiting on the
 * database counts, so a settle that waits for a chain is not cut short by it.
 */
export class DatabaseBudgetSpent extends Error {
  /** Recognised by `isDatabaseUnavailable` (http/errors.ts); MikroORM copies it onto the error it wraps this in. */
  readonly code = 'SVC_DB_REQUEST_TIMEOUT';
  constructor(budgetMs: number) {
    super(`the request waited ${budgetMs} ms on the database in total (SVC_DB_REQUEST_TIMEOUT_MS)`);
    this.name = 'DatabaseBudgetSpent';
  }
}

type Scope = { spentMs: number };
type Client = { query: (...args: unknown[]) => unknown; end: () => Promise<void>; release: (err?: Error | boolean) => void };
type PoolLike = {
  connect: (...args: unknown[]) => unknown;
  on(event: 'connect', listener: (client: Client) => void): unknown;
};

const isPromise = (v: unknown): v is Promise<unknown> => typeof (v as { then?: unknown } | null)?.then === 'function';
/** `rollback` or `rollback to <savepoint>`, as the driver sends them (text or a query config). */
const isRollback = (statement: unknown) => /^\s*rollback\b/i.test(typeof statement === 'string' ? statement : String((statement as { text?: unknown } | null)?.text ?? ''));
/** What `pg` answers a rollback. */
const ROLLED_BACK = { command: 'ROLLBACK', rowCount: null, rows: [], fields: [] };

export class RequestDbBudget {
  private readonly scopes = new AsyncLocalStorage<Scope>();

  constructor(readonly budgetMs: number) {}

  /** Runs `fn` (one request's handling) under a fresh budget: all database work it starts counts. */
  run<T>(fn: () => T): T {
    return this.scopes.run({ spentMs: 0 }, fn);
  }

  /** Runs `fn` outside any request's budget (clean-up a request leaves behind after it answered). */
  outside<T>(fn: () => T): T {
    return this.scopes.exit(fn);
  }

  /**
   * Bounds `work` (started by the scope's request) by what is left of its budget. On running out
   * `abandon` gives up the database resource involved, and a result that still arrives later goes
   * to `late` (a connection handed over after its request gave up is released again).
   */
  private bound<T>(scope: Scope, start: () => T | Promise<T>, abandon: () => void, late: (value: T) => void): T | Promise<T> {
    const left = this.budgetMs - scope.spentMs;
    if (left <= 0) {
      abandon();
      return Promise.reject(new DatabaseBudgetSpent(this.budgetMs));
    }
    const work = start();
    if (!isPromise(work)) return work;
    // Elapsed time of the wait (I/O), not a time of day: the one use of the process clock here.
    const startedAt = performance.now();
    return new Promise<T>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        scope.spentMs = this.budgetMs;
        abandon();
        reject(new DatabaseBudgetSpent(this.budgetMs));
      }, left);
      const finish = () => {
        clearTimeout(timer);
        settled = true;
        scope.spentMs += performance.now() - startedAt;
      };
      (work as Promise<T>).then(
        (value) => {
          if (settled) return late(value);
          finish();
          resolve(value);
        },
        (err: unknown) => {
          if (settled) return;
          finish();
          reject(err);
        },
      );
    });
  }

  /**
   * Applies the budget to a `pg` pool: `connect()` (queueing for a connection, or opening one)
   * and each connection's `query()` made inside a request. Outside any request nothing changes.
   */
  install(pool: PoolLike): void {
    const connect = pool.connect.bind(pool);
    pool.connect = (...args: unknown[]) => {
      const scope = this.scopes.getStore();
      if (!scope || args.length > 0) return connect(...args); // (a callback: not the promise form the driver uses)
      return this.bound(
        scope,
        () => connect() as Promise<Client>,
        () => undefined,
        (client) => client.release(),
      );
    };
    /** Connections closed because a request's budget ran out while they worked for it. */
    const closed = new WeakSet<Client>();
    pool.on('connect', (client) => {
      const query = client.query.bind(client);
      const close = () => {
        closed.add(client);
        void client.end().catch(() => undefined);
      };
      client.query = (...args: unknown[]) => {
        // Closing the connection rolled its transaction back on the server. The driver's own
        // rollback is answered as done, so it hands the connection back (it would keep a connection
        // whose rollback failed) and the pool drops it; anything else on it fails.
        if (closed.has(client)) return isRollback(args[0]) ? Promise.resolve(ROLLED_BACK) : Promise.reject(new DatabaseBudgetSpent(this.budgetMs));
        const scope = this.scopes.getStore();
        // A submittable (a cursor) or a callback answers through its own channel: left as it is.
        const own = typeof (args[0] as { submit?: unknown } | null)?.submit === 'function' || typeof args.at(-1) === 'function';
        if (!scope || own) return query(...args);
        // Closing the connection is the one way to stop a statement that cannot be answered (and
        // to roll back its transaction); a closed connection never returns to the pool.
        const spent = this.budgetMs - scope.spentMs <= 0;
        if (spent && isRollback(args[0])) {
          close();
          return Promise.resolve(ROLLED_BACK);
        }
        return this.bound(scope, () => query(...args), close, () => undefined);
      };
    });
  }
}
