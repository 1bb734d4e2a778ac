import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DbTarget } from '../src/db/orm.js';
import { applyOutcomes, applyReportedOutcome } from '../src/modules/reputation/index.js';
import { applyReputationDeltas } from '../src/modules/reputation/store.js';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { onPostgres, sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { appTargetOf, legacyDatabase } from './helpers/legacy-db.js';

/**
 * A merchant's shared score has no hot row (issue 31): a settle records the merchant's
 * `settled_merchant` event and writes no row of the merchant, so settles of one merchant never
 * wait on each other's row lock; every read answers what the old one-row-per-merchant code did,
 * on a database the old code filled (migrated by Migration20261126000032) and after more settles.
 */
const BEFORE = 'Migration20261126000030Refunds';

let target: DbTarget;
let drop: () => Promise<void> = async () => undefined;
let app: TestApp;

/** Merchants as the old code left them: consistent rows, a saturated one, and one whose row says more than its events. */
const OLD = {
  // 3 settles: 506
  mrch_a: { livemode: false, events: 3, row: { score: 506, outcomes: 3 } },
  // 300 settles: 1000 since the 250th
  mrch_b: { livemode: true, events: 300, row: { score: 1000, outcomes: 300 } },
  // a row whose score came from elsewhere (700) with one event: the old code moves it from 700
  mrch_c: { livemode: false, events: 1, row: { score: 700, outcomes: 1 } },
  // nothing yet
  mrch_d: { livemode: false, events: 0, row: null },
  // a low score from elsewhere and no event: 260 settles take it to 620, counted past 250
  mrch_e: { livemode: true, events: 0, row: { score: 100, outcomes: 0 } },
} as const;
type Old = keyof typeof OLD;

/** What the old code would have stored after `more` settles: +2 each, clamped at every step. */
function oldScore(m: Old, more: number): number | null {
  let score: number | null = OLD[m].row?.score ?? null;
  for (let i = 0; i < more; i++) score = Math.min(1000, Math.max(0, (score ?? 500) + 2));
  return score;
}

const expected = (id: string, score: number | null) =>
  score === null ? { merchantId: id, score: 500, tier: 'standard', known: false } : { merchantId: id, score, tier: score < 400 ? 'risky' : score < 520 ? 'standard' : score < 700 ? 'trusted' : 'elite', known: true };

const readMerchant = async (id: string) => (await app.request('GET', `/v1/reputation/merchant/${id}`)).body;

beforeAll(async () => {
  ({ target, drop } = await legacyDatabase(BEFORE, async (em) => {
    await em.execute(`insert into organizations (id, name) values ('org_h', 'h')`);
    await em.execute(`insert into projects (id, organization_id, name) values ('proj_h', 'org_h', 'h')`);
    for (const [id, m] of Object.entries(OLD)) {
      await em.execute(`insert into merchant_slugs (slug, project_id, created_at) values (?, 'proj_h', now())`, [id.replace('_', '-')]);
      await em.execute(
        `insert into merchants (id, project_id, livemode, slug, name, domain, receiving, rails, receipt_kid, receipt_public_x, receipt_seed_sealed, domain_token)
         values (?, 'proj_h', ?, ?, ?, ?, '{}', '[]', 'k', 'x', 's', 't')`,
        [id, m.livemode, id.replace('_', '-'), id, `${id.replace('_', '-')}.example.com`],
      );
      // every settle the old code recorded: its event and, in the same statement, +2 on the row
      await em.execute(
        `insert into reputation_events (livemode, session_id, subject_type, subject_id, delta, reason, created_at)
         select ?, 'sess_old_' || ? || '_' || i, 'merchant', ?, 2, 'settled_merchant', now() from generate_series(1, ?::int) as i`,
        [m.livemode, id, id, m.events],
      );
      if (m.row) {
        await em.execute(`insert into reputation (livemode, subject_type, subject_id, score, outcomes, updated_at) values (?, 'merchant', ?, ?, ?, now())`, [
          m.livemode,
          id,
          m.row.score,
          m.row.outcomes,
        ]);
      }
    }
    // a project's own ingest report about mrch_a: its adjustment, not the shared score
    await em.execute(
      `insert into reputation_adjustments (project_id, livemode, subject_type, subject_id, adjustment, outcomes, updated_at) values ('proj_h', false, 'merchant', 'mrch_a', 2, 1, now())`,
    );
  }));
  // the app runs the remaining migrations (ours among them) as it starts
  app = await TestApp.start({}, { target: appTargetOf(target) });
}, 180_000);
afterAll(async () => {
  await app?.stop();
  await drop();
});

/** The write part of a settle for the merchant (the agent's `accepted` and the merchant's `settled_merchant`), in the caller's transaction. */
const settleWrites = (tx: Parameters<typeof applyOutcomes>[0], merchant: string, livemode: boolean, session = `sess_${agentId()}`) =>
  applyOutcomes(
    tx,
    session,
    livemode,
    [
      { type: 'agent', subject: agentId(), outcome: 'accepted' },
      { type: 'merchant', subject: merchant, outcome: 'settled_merchant' },
    ],
    app.services.now(),
  );

describe("a merchant's score after the migration (issue 31)", () => {
  it('GIVEN merchants scored by the old code WHEN migrated and after N more settles THEN every read answers what the old code stored', async () => {
    for (const id of Object.keys(OLD) as Old[]) expect(await readMerchant(id), id).toEqual(expected(id, oldScore(id, 0)));

    const settleUpTo = async (from: number, to: number) => {
      for (const id of Object.keys(OLD) as Old[]) {
        // settles from..to of the merchant, each its own session's outcome, in one statement (the settle's CTEs)
        const deltas = Array.from({ length: to - from }, () => ({ sessionId: `sess_${agentId()}`, livemode: OLD[id].livemode, subjectType: 'merchant', subjectId: id, delta: 2, reason: 'settled_merchant' }));
        await app.services.orm.em.fork().transactional((tx) => applyReputationDeltas(tx, deltas, 500, app.services.now()));
        expect(await readMerchant(id), `${id} after ${to}`).toEqual(expected(id, oldScore(id, to)));
      }
    };
    await settleUpTo(0, 1);
    await settleUpTo(1, 5);

    // ingest's answer for a merchant: the shared score plus the reporting project's own adjustment (mrch_a's was 2)
    const report = (session: string, merchant: Old) =>
      app.services.orm.em
        .fork()
        .transactional((tx) => applyReportedOutcome(tx, { projectId: 'proj_h', livemode: false }, session, 'merchant', merchant, 'settled_merchant', app.services.now()));
    expect(await report('ext_h1', 'mrch_a')).toEqual({ score: 516 + 4, tier: 'trusted', known: true });
    expect(await report('ext_h2', 'mrch_c')).toEqual({ score: 710 + 2, tier: 'elite', known: true });
    expect(await report('ext_h3', 'mrch_d')).toEqual({ score: 510 + 2, tier: 'standard', known: true });
    // a report never moves the shared score
    expect(await readMerchant('mrch_a')).toEqual(expected('mrch_a', 516));

    // past saturation: 1000 from the 250th settle on, as the step-by-step clamp made it
    await settleUpTo(5, 260);
    // a repeated outcome of the same session counts once, as before
    await app.services.orm.em.fork().transactional((tx) => settleWrites(tx, 'mrch_b', true, 'sess_twice'));
    await app.services.orm.em.fork().transactional((tx) => settleWrites(tx, 'mrch_b', true, 'sess_twice'));
    expect(await readMerchant('mrch_b')).toEqual(expected('mrch_b', 1000));
    const fresh = `mrch_${agentId().slice(0, 8)}`;
    await sql(app, `insert into merchant_slugs (slug, project_id, created_at) values (?, 'proj_h', now())`, [fresh.replace('_', '-')]);
    await sql(app, `insert into merchants (id, project_id, livemode, slug, name, domain, receiving, rails, receipt_kid, receipt_public_x, receipt_seed_sealed, domain_token)
      values (?, 'proj_h', false, ?, 'F', ?, '{}', '[]', 'k', 'x', 's', 't')`, [fresh, fresh.replace('_', '-'), `${fresh.replace('_', '-')}.example.com`]);
    await app.services.orm.em.fork().transactional((tx) => settleWrites(tx, fresh, false, 'sess_once'));
    await app.services.orm.em.fork().transactional((tx) => settleWrites(tx, fresh, false, 'sess_once'));
    expect(await readMerchant(fresh)).toEqual(expected(fresh, 502));
  });

  it('GIVEN a published merchant WHEN agents buy from it over HTTP THEN its score is 500 + 2 per settled order, read the same with or without a key', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    for (let i = 0; i < 3; i++) {
      const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agentId() });
      expect((await payX402(app, base, s, newBuyer())).res.status).toBe(200);
    }
    expect(await readMerchant(merchant.id)).toEqual(expected(merchant.id, 506));
    expect((await app.request('GET', `/v1/reputation/merchant/${merchant.id}`, { key })).body).toEqual(expected(merchant.id, 506));
    // no row of the merchant was written: its score is its events
    expect(await sql(app, `select count(*)::int as n from reputation where subject_type = 'merchant' and subject_id = ?`, [merchant.id])).toEqual([{ n: 0 }]);
  });
});

describe('no hot row: settles of one merchant never wait on each other (issue 31)', () => {
  it("GIVEN a settle's writes for a merchant in an open transaction THEN no row of the merchant's reputation is written or locked by it", async () => {
    await app.services.orm.em.fork().transactional(async (tx) => {
      await settleWrites(tx, 'mrch_a', false);
      // rows this transaction wrote (and so holds locked until it ends) carry its id as xmin
      const mine = await tx.execute(
        `select count(*)::int as n from reputation where subject_type = 'merchant' and subject_id = 'mrch_a' and xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text`,
      );
      expect(mine).toEqual([{ n: 0 }]);
      const agents = await tx.execute(`select count(*)::int as n from reputation where subject_type = 'agent' and xmin::text = (pg_current_xact_id()::text::bigint % 4294967296)::text`);
      // the check sees what the transaction wrote: the agent's row is there
      expect(agents).toEqual([{ n: 1 }]);
    });
  });

  it('GIVEN one transaction holding a settle of merchant M open WHEN an agent settles with M over HTTP THEN that settle completes without waiting for a lock (PostgreSQL; PGlite runs one transaction at a time)', async () => {
    const { merchant, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const first = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agentId() });
    expect((await payX402(app, base, first, newBuyer())).res.status).toBe(200);
    const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agentId() });
    if (!onPostgres) {
      // one session: the HTTP settle would queue behind the open transaction by construction; the write part is checked above
      await app.services.orm.em.fork().transactional((tx) => settleWrites(tx, merchant.id, false));
      expect((await payX402(app, base, s, newBuyer())).res.status).toBe(200);
      expect(await readMerchant(merchant.id)).toEqual(expected(merchant.id, 506));
      return;
    }
    let lockWaits = 0;
    let status = 0;
    let settled: Promise<unknown> | undefined;
    await app.services.orm.em.fork().transactional(async (tx) => {
      await settleWrites(tx, merchant.id, false);
      settled = payX402(app, base, s, newBuyer()).then((r) => (status = r.res.status));
      // while this transaction is open, the settle either finishes or shows up waiting for a lock
      while (status === 0 && lockWaits === 0) {
        const rows = await sql<{ n: number }>(
          app,
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock' and pid <> pg_backend_pid()",
        );
        lockWaits = Number(rows[0]!.n);
        await new Promise((r) => setTimeout(r, 5));
      }
    });
    // a settle that waited goes through once the transaction has committed; nothing is left hanging
    await settled;
    expect(lockWaits, 'the settle waited for a lock held by the other settle of the same merchant').toBe(0);
    expect(status).toBe(200);
    expect(await readMerchant(merchant.id)).toEqual(expected(merchant.id, 506));
  });
});
