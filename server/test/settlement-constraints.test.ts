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

beforeAll(async () => {
  app = await TestApp.start();
  const shop = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null, maxPerTransactionUsd: 1000 } });
  const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
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
