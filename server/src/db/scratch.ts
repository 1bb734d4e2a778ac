import pg from 'pg';
import { ulid } from 'ulid';
import type { DbTarget } from './orm.js';

/**
 * A fresh, empty PostgreSQL database next to the one `adminUrl` names (tests and
 * benchmarks each get their own), and the function that drops it again.
 */
export async function createScratchDatabase(adminUrl: string, prefix: string, poolMax = 10): Promise<{ target: DbTarget; drop: () => Promise<void> }> {
  const dbName = `${prefix}_${ulid().toLowerCase()}`;
  const run = async (sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl });
    await client.connect();
    try {
      await client.query(sql);
    } finally {
      await client.end();
    }
  };
  await run(`create database ${dbName}`);
  const url = new URL(adminUrl);
  url.pathname = `/${dbName}`;
  return {
    target: { kind: 'postgres', url: url.toString(), poolMax },
    drop: () => run(`drop database if exists ${dbName} with (force)`),
  };
}
