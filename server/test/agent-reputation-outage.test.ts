import { rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { onPostgres } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

/** This file takes its app's database down on purpose; it has its own app for that reason. */
let app: TestApp;
beforeAll(async () => {
  // On disk under PGlite, so the outage below can remove the database files.
  app = await TestApp.start({}, { persistent: true });
});
afterAll(async () => app?.stop());

/**
 * Closes the ORM. MikroORM reconnects lazily on the next query (and PGlite would open a new
 * blank in-memory database), so the database is also made unreachable: PostgreSQL refuses
 * connections to it, and PGlite's data directory is replaced by a plain file.
 */
async function takeDatabaseDown() {
  await app.services.orm.close(true);
  if (onPostgres) {
    const db = new URL((app.target as { url: string }).url).pathname.slice(1);
    const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
    await admin.connect();
    await admin.query(`alter database ${db} allow_connections false`);
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1 and pid <> pg_backend_pid()', [db]);
    await admin.end();
  } else {
    const dir = join((app.target as { dataDir: string }).dataDir, 'pglite');
    rmSync(dir, { recursive: true, force: true });
    writeFileSync(dir, 'gone');
  }
}

describe('reputation during a database outage', () => {
  it('GIVEN a known agent and merchant WHEN the database goes away THEN every reputation route still answers 200 with the neutral default', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
    expect((await payX402(app, base, s, newBuyer())).res.status).toBe(200);
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body.score).toBe(510);

    await takeDatabaseDown();

    const neutral = { score: 500, tier: 'standard', known: false };
    for (const path of [`/v1/reputation/agent/${agent}`, `/v1/reputation/${agent}`, `/api/v1/reputation/${agent}`, `/api/v1/reputation/${agent}/`]) {
      // The key is the merchant's own (it would read test mode): unresolvable while the database is down.
      const res = await app.request('GET', path, { headers: { 'x-svc-api-key': key.secret } });
      expect(res.status, path).toBe(200);
      expect(res.body).toEqual({ agentId: agent, ...neutral });
    }
    const m = await app.request('GET', `/v1/reputation/merchant/${merchant.id}`);
    expect(m.status).toBe(200);
    expect(m.body).toEqual({ merchantId: merchant.id, ...neutral });
    // The readiness probe, by contrast, reports the outage.
    expect((await app.request('GET', '/readyz')).status).toBe(503);
  });
});
