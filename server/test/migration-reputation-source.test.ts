import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { sql } from './helpers/foundation.js';
import type { DbTarget } from '../src/db/orm.js';
import { appTargetOf, legacyDatabase } from './helpers/legacy-db.js';
import { TestApp, type TestKey } from './helpers/harness.js';

/**
 * The migrations of issue 24 items 2 and 8 on a database that already holds what the old code
 * wrote: reputation shared by both modes and by ingest, orders and order events without a
 * `source` in their objects. The database is made at the migration before them, filled with
 * SQL as the old code left it, then the app starts on it (running the new migrations) and is
 * read through HTTP.
 */
const BEFORE = 'Migration20261126000010SettledOrderFkDeferred';

let target: DbTarget;
let drop: () => Promise<void> = async () => undefined;
let app: TestApp;
let pTest: TestKey;
let qLive: TestKey;

const X = randomUUID();
const Z = randomUUID();
const U = randomUUID();
const EVT_HOSTED = `evt_${ulid().toLowerCase()}`;
const EVT_INGEST = `evt_${ulid().toLowerCase()}`;
const at = (minute: number) => new Date(Date.UTC(2026, 10, 20, 10, minute)).toISOString();

/** The rows the old code left: projects P (test and live merchants) and Q (ingest only). */
const LEGACY = [
  `insert into organizations (id, name) values ('org_m', 'm')`,
  `insert into projects (id, organization_id, name) values ('proj_p', 'org_m', 'p'), ('proj_q', 'org_m', 'q')`,
  `insert into merchants (id, project_id, livemode, slug, name, domain, receiving, rails, receipt_kid, receipt_public_x, receipt_seed_sealed) values
     ('mrch_t', 'proj_p', false, 'shop-t', 'T', 'shop-t.example.com', '{}', '[]', 'k', 'x', 's'),
     ('mrch_l', 'proj_p', true, 'shop-l', 'L', 'shop-l.example.com', '{}', '[]', 'k', 'x', 's')`,
  // Hosted sessions: S1 in test, S2 in live, and 50 live sessions of agent Z.
  `insert into checkout_sessions (id, merchant_id, livemode, agent_id, state, lines, currency, subtotal, tax, total, rail, path_prefix, request_hash, expires_at)
   select id, merchant_id, livemode, agent_id::uuid, 'rejected', '[]'::jsonb, 'USD', '1.00', '0.00', '1.00', 'mock', '/m/x', 'h', '${at(59)}'::timestamptz
   from (values ('sess_s1', 'mrch_t', false, '${X}'), ('sess_s2', 'mrch_l', true, '${X}')) as v (id, merchant_id, livemode, agent_id)
   union all
   select 'sess_z' || i, 'mrch_l', true, '${Z}'::uuid, 'rejected', '[]'::jsonb, 'USD', '1.00', '0.00', '1.00', 'mock', '/m/x', 'h', '${at(59)}'::timestamptz from generate_series(1, 50) as i`,
  // Project Q reported a rejection of X through a live ingest key, naming no known merchant.
  `insert into ingest_log (project_id, livemode, kind, session_id, agent_id, decision, created_at) values ('proj_q', true, 'decision', 'ext_q1', '${X}', 'reject', '${at(3)}')`,
  // Every delta ever applied, as the old code recorded it (no mode, no project).
  `insert into reputation_events (session_id, subject_type, subject_id, delta, reason, created_at) values
     ('sess_s1', 'agent', '${X}', 10, 'accepted', '${at(1)}'),
     ('sess_s1', 'merchant', 'mrch_t', 2, 'settled_merchant', '${at(1)}'),
     ('sess_s2', 'agent', '${X}', -15, 'rejected', '${at(2)}'),
     ('ext_q1', 'agent', '${X}', -15, 'rejected', '${at(3)}'),
     ('sess_orphan', 'agent', '${U}', 10, 'accepted', '${at(4)}')`,
  // Z: 40 rejections (the score stops at 0), then 10 accepted purchases: 100, not 0.
  `insert into reputation_events (session_id, subject_type, subject_id, delta, reason, created_at)
   select 'sess_z' || i, 'agent', '${Z}', case when i <= 40 then -15 else 10 end, case when i <= 40 then 'rejected' else 'accepted' end,
          timestamptz '${at(10)}' + i * interval '1 second'
   from generate_series(1, 50) as i`,
  // The one shared score per subject the old code kept.
  `insert into reputation (subject_type, subject_id, score, outcomes, updated_at) values
     ('agent', '${X}', 480, 3, '${at(3)}'), ('merchant', 'mrch_t', 502, 1, '${at(1)}'), ('agent', '${U}', 510, 1, '${at(4)}'), ('agent', '${Z}', 100, 50, '${at(11)}')`,
  // Orders: a hosted rejection (session S1), an ingested accept, and an order with no checkout session that says hosted.
  `insert into orders (id, session_id, project_id, merchant_id, livemode, agent_id, decision, total, items, rail_name, settlement_ref, receipt_id, mandate_type, trust_tier, source, created_at) values
     ('ord_1', 'sess_s1', 'proj_p', 'mrch_t', false, '${X}', 'reject', null, '[]', 'mock', null, null, 'none', 'cautious', 'hosted', '${at(1)}'),
     ('ord_2', 'ext_p2', 'proj_p', 'mrch_t', false, '${X}', 'accept', null, '[]', 'x402', '0xinvented', 'rcpt_2', 'none', 'standard', 'ingest', '${at(5)}'),
     ('ord_3', 'ext_p3', 'proj_p', 'mrch_t', false, '${X}', 'hold', null, '[]', 'x402', null, null, 'none', 'standard', default, '${at(6)}')`,
  // Their events, with objects as the old code wrote them (no source).
  ...[
    [EVT_HOSTED, 'order.rejected', 'ord_1', 'sess_s1'],
    [EVT_INGEST, 'order.settled', 'ord_2', 'ext_p2'],
  ].map(
    ([id, type, order, session]) => `insert into events (id, project_id, merchant_id, livemode, type, payload, created_at) values ('${id}', 'proj_p', 'mrch_t', false, '${type}',
      '${JSON.stringify({ id, type, created: 1795250000, livemode: false, api_version: 'v1', data: { object: { id: order, session_id: session, merchant_id: 'mrch_t', agent_id: X, total: null, items: [], rail_name: 'x402', mandate_type: 'none', mandate_ref: null, trust_tier: 'standard' } } })}', '${at(7)}')`,
  ),
];

beforeAll(async () => {
  ({ target, drop } = await legacyDatabase(BEFORE, async (em) => {
    for (const statement of LEGACY) await em.execute(statement);
  }));
  // The app runs the remaining migrations as it starts.
  app = await TestApp.start({}, { target: appTargetOf(target) });
  pTest = await app.key('test', { projectId: 'proj_p' });
  qLive = await app.key('live', { projectId: 'proj_q' });
}, 180_000);
afterAll(async () => {
  await app?.stop();
  await drop();
});

const read = async (agent: string, key?: TestKey) => (await app.request('GET', `/v1/reputation/agent/${agent}`, key ? { key } : {})).body;

describe('migrating reputation to one score per mode (issue 24.2)', () => {
  it('GIVEN one score per agent fed by both modes and by ingest WHEN migrated THEN each mode has the score its own outcomes make, and an ingest report counts only for the project that sent it', async () => {
    // X: +10 in test, -15 in live, -15 reported by project Q in live.
    expect(await read(X)).toEqual({ agentId: X, score: 485, tier: 'standard', known: true });
    expect(await read(X, pTest)).toEqual({ agentId: X, score: 510, tier: 'standard', known: true });
    expect(await read(X, qLive)).toEqual({ agentId: X, score: 470, tier: 'standard', known: true });
    // The running clamp is kept: 40 rejections stop at 0, then 10 purchases make 100.
    expect(await read(Z)).toEqual({ agentId: Z, score: 100, tier: 'risky', known: true });
    // A delta whose session nobody knows counts in test mode only.
    expect(await read(U)).toEqual({ agentId: U, score: 500, tier: 'standard', known: false });
    expect(await read(U, pTest)).toEqual({ agentId: U, score: 510, tier: 'standard', known: true });
    // A merchant's score is in its own mode.
    expect((await app.request('GET', '/v1/reputation/merchant/mrch_t')).body).toEqual({ merchantId: 'mrch_t', score: 502, tier: 'standard', known: true });

    expect(await sql(app, 'select livemode, score, outcomes from reputation where subject_id = ? order by livemode', [X])).toEqual([
      { livemode: false, score: 510, outcomes: 1 },
      { livemode: true, score: 485, outcomes: 1 },
    ]);
    expect(await sql(app, 'select project_id, livemode, adjustment, outcomes from reputation_adjustments')).toEqual([{ project_id: 'proj_q', livemode: true, adjustment: -15, outcomes: 1 }]);
  });
});

describe('migrating orders to say where they came from (issue 24.8)', () => {
  it('GIVEN orders and order events written before source was shown WHEN migrated THEN the feed and the events say hosted or ingest, an order without a checkout session is ingest, and no insert can leave source out', async () => {
    const feed = await app.request('GET', '/v1/orders', { key: pTest });
    expect(feed.status, feed.text).toBe(200);
    expect(Object.fromEntries(feed.body.data.map((o: any) => [o.id, o.source]))).toEqual({ ord_1: 'hosted', ord_2: 'ingest', ord_3: 'ingest' });

    for (const [id, source] of [[EVT_HOSTED, 'hosted'], [EVT_INGEST, 'ingest']]) {
      const ev = await app.request('GET', `/v1/events/${id}`, { key: pTest });
      expect(ev.status, ev.text).toBe(200);
      expect(ev.body.data.object.source).toBe(source);
    }

    const insert = (source: string) =>
      `insert into orders (id, session_id, project_id, merchant_id, livemode, agent_id, decision, items, rail_name, mandate_type, trust_tier, source) values
       ('ord_${randomUUID()}', 'ext_${randomUUID()}', 'proj_p', 'mrch_t', false, '${X}', 'hold', '[]', 'x402', 'none', 'standard', ${source})`;
    await expect(sql(app, insert('default'))).rejects.toThrow(/source/);
    await expect(sql(app, insert(`'elsewhere'`))).rejects.toThrow(/orders_source/);
  });
});
