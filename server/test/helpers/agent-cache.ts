import type { TestApp } from './harness.js';

type Logging = { logQuery(query: string, context?: unknown): void };

/**
 * Runs `fn` and returns the SQL statements the app's ORM connection sent meanwhile (every
 * query, BEGIN and COMMIT included; every ORM and `em.execute` statement passes through
 * `logQuery`). The agent cache's listening session is its own pg Client, not counted.
 * Nothing else may use the app while `fn` runs.
 */
export async function statementsDuring<T>(app: TestApp, fn: () => Promise<T>): Promise<{ result: T; statements: string[] }> {
  const conn = app.services.orm.em.getConnection() as unknown as Logging;
  const original = conn.logQuery;
  const statements: string[] = [];
  conn.logQuery = function (this: Logging, query: string, context?: unknown) {
    statements.push(query);
    return original.call(this, query, context);
  };
  try {
    return { result: await fn(), statements };
  } finally {
    conn.logQuery = original;
  }
}

/**
 * A barrier, not a timing assertion: polls `read` until `ok` holds. The deadline only turns
 * a hang into a failure naming `what`.
 */
export async function until<T>(what: string, read: () => Promise<T>, ok: (value: T) => boolean, deadlineMs = 60_000): Promise<T> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const value = await read();
    if (ok(value)) return value;
    if (Date.now() > end) throw new Error(`never saw ${what}`);
    await new Promise((r) => setTimeout(r, 2));
  }
}

/** Waits until the app's agent cache listens (PostgreSQL) and serves: its listener opens on the first agent read. */
export async function cacheServing(app: TestApp, warm: () => Promise<unknown>): Promise<void> {
  await warm();
  await until('the agent cache listening', async () => app.services.caches.agent.listening, Boolean);
}
