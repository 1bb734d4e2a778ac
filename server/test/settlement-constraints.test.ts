import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

/**
 * The database's own guard of "an order exists only beside a settled attempt"
 * (orders_settlement_attempt_fk, checked at commit since phase 3 writes the attempt's
 * `settled` and the order in one flush).
 */
let app: TestApp;
let attemptId: string;
let sessionId: string;
/** Another session of the merchant, open (nothing paid). */
let otherSessionId: string;

beforeAll(async () => {
  app = await TestApp.start();
  const shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null, maxPerTransactionUsd: 1000 } });
  const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
  sessionId = s.id;
  otherSessionId = (await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }])).id;
  expect((await payX402(app, shop.base, s, newBuyer())).res.status).toBe(200);
  const [order] = await sql<{ settlement_attempt_id: string }>(app, 'select settlement_attempt_id from orders where session_id = ?', [s.id]);
  attemptId = order!.settlement_attempt_id;
});
afterAll(async () => app?.stop());

describe('an accepted order and its settlement attempt', () => {
  it('GIVEN an accepted order WHEN its attempt is moved back to pending THEN the commit is refused and the attempt stays settled', async () => {
    const flip = app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute(`update settlement_attempts set status = 'pending' where id = ?`, [attemptId]);
    });
    await expect(flip).rejects.toThrow(/orders_settlement_attempt_fk|foreign key/i);
    expect(await sql(app, 'select status from settlement_attempts where id = ?', [attemptId])).toEqual([{ status: 'settled' }]);
  });

  it('GIVEN an accepted order WHEN a transaction moves its attempt away and back before committing THEN the commit passes (the check is at commit)', async () => {
    await app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute(`update settlement_attempts set status = 'pending' where id = ?`, [attemptId]);
      await tx.execute(`update settlement_attempts set status = 'settled' where id = ?`, [attemptId]);
    });
    expect(await sql(app, 'select status from settlement_attempts where id = ?', [attemptId])).toEqual([{ status: 'settled' }]);
  });
});

/**
 * Funds moved iff exactly one order, one receipt and one order.settled: the database refuses a
 * second of each however a bug in the code might try to write it (a copy of the accepted row
 * with a new id, through a transaction that is then rolled back).
 */
describe('one order, one receipt, one order.settled, one open attempt per payment', () => {
  /** Copies the rows `from` selects into `table` after `change` (SQL over the copy `c`), in one transaction. */
  const copyInto = (table: string, from: string, params: unknown[], change: string) =>
    app.services.orm.em.fork().transactional(async (tx) => {
      await tx.execute(`create temp table c on commit drop as ${from}`, params);
      await tx.execute(change);
      await tx.execute(`insert into ${table} ${table === 'events' ? 'overriding system value ' : ''}select * from c`);
    });

  it('GIVEN an accepted order WHEN a second order of its session is written THEN orders_session refuses it', async () => {
    await expect(copyInto('orders', 'select * from orders where session_id = ?', [sessionId], "update c set id = id || 'x', decision = 'reject', settlement_ref = null, settlement_attempt_id = null, settlement_status = null, receipt_id = null")).rejects.toThrow(/orders_session/);
  });

  it('GIVEN an accepted order WHEN a second receipt of it is written THEN receipts_order refuses it', async () => {
    await expect(copyInto('receipts', 'select * from receipts where session_id = ?', [sessionId], "update c set id = id || 'x'")).rejects.toThrow(/receipts_order/);
  });

  it('GIVEN an accepted order WHEN a second order.settled of it is recorded THEN events_one_settled_per_order refuses it', async () => {
    const from = "select * from events where type = 'order.settled' and payload -> 'data' -> 'object' ->> 'session_id' = ?";
    await expect(copyInto('events', from, [sessionId], "update c set id = id || 'x', seq = seq + 1000000000")).rejects.toThrow(/events_one_settled_per_order/);
  });

  it('GIVEN a settled attempt WHEN another live attempt of the session, or of the same authorization for another session, is written THEN the database refuses it', async () => {
    const from = 'select * from settlement_attempts where id = ?';
    // another open (not failed) attempt for the session, with another nonce
    await expect(copyInto('settlement_attempts', from, [attemptId], "update c set id = id || 'x', status = 'pending', reference = null, nonce = nonce || 'x'")).rejects.toThrow(/settlement_attempts_open/);
    // the same authorization again, for another session
    await expect(copyInto('settlement_attempts', from, [attemptId], `update c set id = id || 'x', status = 'pending', reference = null, session_id = '${otherSessionId}'`)).rejects.toThrow(/settlement_attempts_authorization/);
  });

  it('GIVEN a settled attempt WHEN its reference is erased THEN settlement_attempts_settled_ref refuses it', async () => {
    const erase = app.services.orm.em.fork().transactional((tx) => tx.execute('update settlement_attempts set reference = null where id = ?', [attemptId]));
    await expect(erase).rejects.toThrow(/settlement_attempts_settled_ref/);
    expect(await sql(app, 'select count(*)::int as n from orders where session_id = ?', [sessionId])).toEqual([{ n: 1 }]);
  });
});
