import { expect } from 'vitest';
import { expectErrorShape, type ApiResponse, type TestApp } from './harness.js';

/** Raw SQL against the app's own database (`?` placeholders), outside any request. */
export async function sql<T = Record<string, any>>(app: TestApp, query: string, params: unknown[] = []): Promise<T[]> {
  return app.services.orm.em.fork().execute(query, params) as Promise<T[]>;
}

/** merchants.config_version, the manifest cache key every config write bumps. */
export async function configVersion(app: TestApp, merchantId: string): Promise<number> {
  const rows = await sql<{ config_version: number }>(app, 'select config_version from merchants where id = ?', [merchantId]);
  expect(rows).toHaveLength(1);
  return Number(rows[0]!.config_version);
}

/** Stack frames, file paths or exception names that must never reach a client. */
const LEAK = /(\bat\s+\S+\s+\(|\.ts:\d+|\.js:\d+|node_modules|Error:\s|stack)/;

/** THEN-helper: the status, exactly the two error keys, the primary code, and no stack trace. */
export function expectError(res: ApiResponse, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expectErrorShape(res.body);
  expect(res.body.reason_codes[0], res.text).toBe(code);
  expect(res.body.error_human.length).toBeGreaterThan(0);
  expect(res.body.error_human).not.toContain('\n');
  expect(res.text).not.toMatch(LEAK);
}

export const onPostgres = Boolean(process.env.DATABASE_URL);

/**
 * Runs `lockSql` (an UPDATE of one merchants row, `?` = merchantId) in a transaction of
 * its own, fires `request` while that row lock is held and, on PostgreSQL, commits only
 * once the request is blocked behind the lock; so the request has read the row before the
 * change and writes after it. PGlite is a single session whose transactions never
 * interleave, so there the request simply runs after the commit.
 */
export async function racePastRowLock<T>(app: TestApp, lockSql: string, merchantId: string, request: () => Promise<T>): Promise<T> {
  let pending!: Promise<T>;
  await app.services.orm.em.fork().transactional(async (tx) => {
    await tx.execute(lockSql, [merchantId]);
    pending = request();
    if (onPostgres) await waitForLockWaiter(app);
  });
  return pending;
}

async function waitForLockWaiter(app: TestApp) {
  for (let i = 0; i < 500; i++) {
    const rows = await sql<{ n: number }>(
      app,
      "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
    );
    if (Number(rows[0]!.n) > 0) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error('no request ever waited for the row lock');
}
