import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canonicalHash } from '../src/lib/canonical-json.js';
import { sql } from './helpers/foundation.js';
import type { DbTarget } from '../src/db/orm.js';
import { appTargetOf, legacyDatabase } from './helpers/legacy-db.js';
import { TestApp } from './helpers/harness.js';

/**
 * Migration20261126000031HotPath (issue 31) on a database the old code wrote: a settled session
 * holding its receipt's JWS three times (receipts.jws, checkout_sessions.receipt_jws, inside its
 * stored settle answer). Made at the migration before it, filled with SQL as the old code left
 * it, then the app starts on it (running the migration) and is read through HTTP.
 */
const BEFORE = 'Migration20261126000030Refunds';
const JWS = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0XzEifQ.c2lnbmF0dXJl';
const ANSWER = JSON.stringify({ status: 'accepted', order_id: 'ord_1', receipt: JWS, fulfillment: { rail: 'mock', reference: 'mock_ref_1' } });
// an answer stored in a form that does not carry its receipt as written: kept as it is
const ODD = JSON.stringify({ status: 'accepted', order_id: 'ord_2', receipt: 'other', fulfillment: { rail: 'mock', reference: 'mock_ref_2' } });
const PAYMENT = { mock: true };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 20, 10, minute)).toISOString();

const LEGACY = [
  `insert into organizations (id, name) values ('org_m', 'm')`,
  `insert into projects (id, organization_id, name) values ('proj_p', 'org_m', 'p')`,
  `insert into merchant_slugs (slug, project_id, created_at) values ('shop-t', 'proj_p', '${at(0)}')`,
  `insert into merchants (id, project_id, livemode, slug, name, domain, receiving, rails, receipt_kid, receipt_public_x, receipt_seed_sealed, domain_token, published_at) values
     ('mrch_t', 'proj_p', false, 'shop-t', 'T', 'shop-t.example.com', '{"mock":{"account":"acct"}}', '["mock"]', 'k', 'x', 's', 'tok', '${at(0)}')`,
  ...[
    ['sess_1', 'ord_1', 'rcpt_1', JWS, ANSWER],
    ['sess_2', 'ord_2', 'rcpt_2', JWS, ODD],
  ].map(
    ([id, order, receipt, jws, answer]) => `insert into checkout_sessions (id, merchant_id, livemode, agent_id, state, lines, currency, subtotal, tax, total, rail, path_prefix, request_hash,
       expires_at, settled_at, order_id, receipt_id, receipt_jws, settlement_ref, settle_payment_hash, settle_status, settle_response)
     values ('${id}', 'mrch_t', false, '0b8a3f34-6f43-4c5e-9d7a-2f1f0f8c1a11', 'accepted', '[]'::jsonb, 'USD', '1.00', '0.00', '1.00', 'mock', '/m/mrch_t', 'h',
       '${at(59)}', '${at(2)}', '${order}', '${receipt}', '${jws}', 'mock_ref', '${canonicalHash(PAYMENT)}', 200, '${answer}')`,
  ),
  `insert into orders (id, session_id, project_id, merchant_id, livemode, agent_id, decision, total, items, rail_name, settlement_ref, receipt_id, mandate_type, trust_tier, source, created_at) values
     ('ord_1', 'sess_1', 'proj_p', 'mrch_t', false, '0b8a3f34-6f43-4c5e-9d7a-2f1f0f8c1a11', 'accept', null, '[]', 'mock', 'mock_ref_1', 'rcpt_1', 'none', 'cautious', 'ingest', '${at(2)}'),
     ('ord_2', 'sess_2', 'proj_p', 'mrch_t', false, '0b8a3f34-6f43-4c5e-9d7a-2f1f0f8c1a11', 'accept', null, '[]', 'mock', 'mock_ref_2', 'rcpt_2', 'none', 'cautious', 'ingest', '${at(2)}')`,
  `insert into receipts (id, order_id, session_id, merchant_id, jws, claims, created_at) values
     ('rcpt_1', 'ord_1', 'sess_1', 'mrch_t', '${JWS}', '{}', '${at(2)}'),
     ('rcpt_2', 'ord_2', 'sess_2', 'mrch_t', '${JWS}', '{}', '${at(2)}')`,
];

let target: DbTarget;
let drop: () => Promise<void> = async () => undefined;
let app: TestApp;

beforeAll(async () => {
  ({ target, drop } = await legacyDatabase(BEFORE, async (em) => {
    for (const statement of LEGACY) await em.execute(statement);
  }));
  app = await TestApp.start({}, { target: appTargetOf(target) });
}, 180_000);
afterAll(async () => {
  await app?.stop();
  await drop();
});

describe('the receipt JWS stored once (issue 31)', () => {
  it('GIVEN a session settled before the migration WHEN migrated THEN its JWS is only in receipts, and the same payment replays the first answer byte for byte', async () => {
    expect(await sql(app, "select column_name from information_schema.columns where table_name = 'checkout_sessions' and column_name = 'receipt_jws'")).toEqual([]);
    const [row] = await sql<{ settle_response: string }>(app, "select settle_response from checkout_sessions where id = 'sess_1'");
    expect(row!.settle_response).toBe(ANSWER.replace(`"receipt":"${JWS}"`, '"receipt":null'));

    const replay = await app.request('POST', '/m/shop-t/agent/checkout/sess_1/settle', { body: { payment: PAYMENT } });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.text).toBe(ANSWER);
    expect((await app.request('GET', '/m/shop-t/agent/checkout/sess_1')).body.receipt).toBe(JWS);
  });

  it('GIVEN a stored answer that does not carry its session receipt as written WHEN migrated THEN it is kept and replayed as stored', async () => {
    const [row] = await sql<{ settle_response: string }>(app, "select settle_response from checkout_sessions where id = 'sess_2'");
    expect(row!.settle_response).toBe(ODD);
    const replay = await app.request('POST', '/m/shop-t/agent/checkout/sess_2/settle', { body: { payment: PAYMENT } });
    expect(replay.status, replay.text).toBe(200);
    expect(replay.text).toBe(ODD);
  });
});
