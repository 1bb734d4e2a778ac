import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { AgentClient } from '../../sdk/src/index.js';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { eventTypes, ordersOf, poll, settle } from './helpers/agent-protocol.js';
import { publishedMerchant, signPayment } from './helpers/agent.js';
import { sql } from './helpers/foundation.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { startSettlementWorker, type SettlementWorker } from '../src/modules/settlement/reconciler.js';
import { startLiveApp } from './helpers/live.js';
import { countQueries } from './helpers/query-counter.js';
import { resolveAttempt } from '../src/modules/settlement/engine.js';
import { writeAcceptedAttempt } from '../src/modules/settlement/store.js';
import { OrderEntity } from '../src/modules/orders/entity.js';
import type { PaymentProof } from '../src/rails/types.js';

/**
 * Live mode end to end on a real EVM: anvil with chain id 8453 and an EIP-3009 token at the
 * real USDC address, the `onchain` facilitator broadcasting from relayer accounts, through
 * HTTP and the agent SDK. Nothing about the chain is mocked.
 */
let chain: Anvil;
let app: TestApp;
let key: TestKey;
let payTo: Address;
let base: string;
let merchantId: string;
const relayerKeys = [generatePrivateKey(), generatePrivateKey(), generatePrivateKey(), generatePrivateKey()];

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, relayerKeys);
  key = await app.key('live');
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
    products: [{ sku: 'coffee', amount: '4.50' }, { sku: 'beans', amount: '12.00' }],
    policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
  });
  merchantId = shop.merchant.id;
  base = shop.base;
}, 120_000);
afterAll(async () => {
  await app?.stop();
  await chain?.stop();
});

async function fundedBuyer(usdc = 100_000_000n): Promise<PrivateKeyAccount> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  if (usdc > 0n) await chain.mintUsdc(buyer.address, usdc);
  return buyer;
}

async function openLive(sku = 'coffee') {
  const r = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku, qty: 1 }] } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.session_id as string, pr: r.body.payment_required };
}

type SignedPayment = Awaited<ReturnType<typeof signPayment>>;

/** The settle body's payment as the proof a third party carries on chain (anvil.sendAuthorization). */
function proofOf(p: SignedPayment, amountBaseUnits = p.payment.authorization.value): PaymentProof {
  return { chain: 'base', payTo: p.payment.authorization.to, amountBaseUnits, authorization: p.payment.authorization, signature: p.payment.signature };
}

/** Transactions the relayers have sent in all (their account nonces). */
const relayerTxCount = async () => {
  let n = 0;
  for (const k of relayerKeys) n += await chain.client.getTransactionCount({ address: privateKeyToAccount(k).address });
  return n;
};

const countRows = async (table: string, where: string, params: unknown[]) => Number((await sql(app, `select count(*)::int as n from ${table} where ${where}`, params))[0]!.n);

/** Runs `fn` with mining off and a 1 s settle wait (a settle answers 202 with its transfer in the pool); restores both, and stops a worker `fn` started. */
async function onSlowChain(fn: (startWorker: () => void) => Promise<void>) {
  await chain.setAutomine(false);
  const realWait = app.services.config.SVC_SETTLE_WAIT_MS;
  (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = 1_000;
  let worker: SettlementWorker | null = null;
  try {
    await fn(() => (worker = startSettlementWorker(app.services, { intervalMs: 200 })));
  } finally {
    await (worker as SettlementWorker | null)?.stop();
    (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = realWait;
    await chain.setAutomine(true);
  }
}

/** The agent's poll, repeated while the session is settling (a barrier: at most 120 s, for a busy machine). */
async function pollPastSettling(sessionId: string, at = base) {
  const deadline = Date.now() + 120_000;
  let view = await poll(app, at, sessionId);
  while (view.body.state === 'settling' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200));
    view = await poll(app, at, sessionId);
  }
  return view;
}

describe('live mode on a real chain (onchain facilitator)', () => {
  it('GIVEN a live merchant on base WHEN an agent buys with the SDK THEN balances move by exactly amountBaseUnits, the reference is the mined transaction and the order, receipt and events exist once', async () => {
    const buyer = await fundedBuyer();
    const before = { buyer: await chain.usdcBalance(buyer.address), merchant: await chain.usdcBalance(payTo) };
    const agent = new AgentClient({ account: buyer, agentId: randomUUID() });
    const shop = await agent.discover(`${app.baseUrl}${base}`);
    expect(shop.manifest.livemode).toBe(true);
    const outcome = await shop.buy([{ sku: 'coffee', qty: 1 }]);
    if (outcome.status !== 'accepted') throw new Error(JSON.stringify(outcome));

    const hash = outcome.fulfillment.reference as Hex;
    const receipt = await chain.client.getTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await chain.usdcBalance(buyer.address)).toBe(before.buyer - 4_500_000n);
    expect(await chain.usdcBalance(payTo)).toBe(before.merchant + 4_500_000n);

    const claims = await shop.verifyReceipt(outcome.receipt);
    expect(claims).toMatchObject({ settlementRef: hash, chain: 'base', livemode: true, orderId: outcome.order_id });
    expect(await ordersOf(app, outcome.session_id)).toHaveLength(1);
    expect(await eventTypes(app, outcome.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect(await countRows('receipts', 'order_id = ?', [outcome.order_id])).toBe(1);
    expect(await countRows('settlement_attempts', "session_id = ? and status = 'settled' and reference = ?", [outcome.session_id, hash])).toBe(1);
    expect((await poll(app, base, outcome.session_id)).body).toMatchObject({ state: 'accepted', settlement: { rail: 'x402', reference: hash } });
  });

  it('GIVEN payments the chain refuses WHEN they settle THEN replay, unfunded, expired, overpaid and wrong-domain answer their 402 codes and no funds move', async () => {
    const merchantBefore = await chain.usdcBalance(payTo);
    // A replay: the same authorization (nonce) on a second session.
    const buyer = await fundedBuyer();
    const first = await openLive();
    const paid = await signPayment(buyer, first.pr);
    expect((await settle(app, base, first.id, paid)).status).toBe(200);
    const second = await openLive();
    const replay = await settle(app, base, second.id, paid);
    expect(replay.status, replay.text).toBe(402);
    expect(replay.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);

    // The payer spent the nonce on chain on another authorization of theirs (to another
    // address): only the chain knows, the simulation finds it, and this merchant was not paid.
    const outside = await fundedBuyer();
    const s3 = await openLive();
    const p3 = await signPayment(outside, s3.pr);
    const elsewhere = await signPayment(outside, s3.pr, { to: privateKeyToAccount(generatePrivateKey()).address, nonce: p3.payment.authorization.nonce });
    await chain.client.waitForTransactionReceipt({ hash: await chain.sendAuthorization(proofOf(elsewhere)), pollingInterval: 50 });
    const used = await settle(app, base, s3.id, p3);
    expect(used.status, used.text).toBe(402);
    expect(used.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    const afterOutside = await chain.usdcBalance(payTo);

    const poor = await fundedBuyer(0n);
    const s4 = await openLive();
    const unfunded = await settle(app, base, s4.id, await signPayment(poor, s4.pr));
    expect(unfunded.status, unfunded.text).toBe(402);
    expect(unfunded.body.reason_codes).toEqual(['INSUFFICIENT_FUNDS']);

    const s5 = await openLive();
    const now = Math.floor(Date.now() / 1000);
    const expired = await settle(app, base, s5.id, await signPayment(buyer, s5.pr, { validBefore: now + 2 }));
    expect(expired.body.reason_codes).toEqual(['PAYMENT_EXPIRED']);

    // More than the total: the amount is exact, an overpayment is not accepted (nor charged).
    const over = await settle(app, base, s5.id, await signPayment(buyer, s5.pr, { value: String(BigInt(s5.pr.amountBaseUnits) + 1n) }));
    expect(over.status, over.text).toBe(402);
    expect(over.body.reason_codes).toEqual(['PAYMENT_AMOUNT_MISMATCH']);

    const wrongDomain = await settle(app, base, s5.id, await signPayment(buyer, s5.pr, { domainName: 'USDC' }));
    expect(wrongDomain.status, wrongDomain.text).toBe(402);
    expect(wrongDomain.body.reason_codes).toEqual(['SIGNER_MISMATCH']);

    // Only the first payment moved funds to the merchant.
    expect(afterOutside - merchantBefore).toBe(4_500_000n);
    expect(await chain.usdcBalance(payTo)).toBe(afterOutside);
    for (const s of [second, s3, s4, s5]) {
      expect(await ordersOf(app, s.id)).toHaveLength(0);
      expect((await poll(app, base, s.id)).body.state).toBe('awaiting_payment');
    }
  });

  it('GIVEN 16 buyers at once WHEN they settle through four relayer accounts THEN all 16 are mined with no nonce error and each has one order', async () => {
    const buyers: PrivateKeyAccount[] = [];
    for (let i = 0; i < 16; i++) buyers.push(await fundedBuyer()); // the minter is one account: one at a time
    const merchantBefore = await chain.usdcBalance(payTo);
    const sessions = await Promise.all(buyers.map(() => openLive()));
    const results = await Promise.all(sessions.map(async (s, i) => settle(app, base, s.id, await signPayment(buyers[i]!, s.pr))));
    for (const r of results) expect(r.status, r.text).toBe(200);
    const hashes = new Set(results.map((r) => r.body.fulfillment.reference));
    expect(hashes.size).toBe(16);
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore + 16n * 4_500_000n);
    const relayersUsed = await sql(app, 'select count(distinct relayer)::int as n from settlement_transactions where tx_hash in (?)', [[...hashes].map((h) => h.toLowerCase())]);
    expect(Number(relayersUsed[0]!.n)).toBeGreaterThan(1);
  });

  it('GIVEN a chain that does not mine within the bound WHEN an agent settles THEN 202 settlement_pending, the poll shows settling, and the reconciler writes the order once the block is mined', async () => {
    const buyer = await fundedBuyer();
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    await onSlowChain(async (startWorker) => {
      const res = await settle(app, base, s.id, payment);
      expect(res.status, res.text).toBe(202);
      expect(res.body).toMatchObject({ status: 'settlement_pending', reason_codes: ['SETTLEMENT_PENDING'], next: `GET ${base}/agent/checkout/${s.id}` });
      expect((await poll(app, base, s.id)).body).toMatchObject({ state: 'settling', next: `GET ${base}/agent/checkout/${s.id}` });
      // The same payment again learns it is pending; another payment is refused.
      expect((await settle(app, base, s.id, payment)).text).toBe(res.text);
      const other = await settle(app, base, s.id, await signPayment(buyer, s.pr));
      expect(other.status).toBe(409);
      expect(other.body.reason_codes).toEqual(['SETTLEMENT_IN_PROGRESS']);
      expect(await ordersOf(app, s.id)).toHaveLength(0);

      await chain.mine();
      startWorker();
      const view = await pollPastSettling(s.id);
      expect(view.body.state).toBe('accepted');
      const hash = view.body.settlement.reference as Hex;
      expect((await chain.client.getTransactionReceipt({ hash })).status).toBe('success');
      expect(await ordersOf(app, s.id)).toHaveLength(1);
      expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
      // The agent's repeated settle now replays the accepted result.
      const replay = await settle(app, base, s.id, payment);
      expect(replay.status).toBe(200);
      expect(replay.body.fulfillment.reference).toBe(hash);
    });
  });

  it('GIVEN a live settle in flight WHEN the payer cancels the authorization on chain ahead of our transfer THEN no order, no receipt, no event: the session is handed back with NONCE_ALREADY_USED and nothing moved', async () => {
    const buyer = await fundedBuyer();
    const before = await chain.usdcBalance(payTo);
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    await onSlowChain(async (startWorker) => {
      // our transfer is in the pool when the settle answers 202; the payer's cancel goes in ahead of it
      const res = await settle(app, base, s.id, payment);
      expect(res.status, res.text).toBe(202);
      const nonce = (payment.payment as { authorization: { nonce: Hex } }).authorization.nonce;
      const cancel = await chain.cancelAuthorization(buyer, nonce);
      await chain.mine();
      const cancelReceipt = await chain.client.getTransactionReceipt({ hash: cancel });
      expect(cancelReceipt.status).toBe('success');
      const [ours] = await sql(app, 'select t.tx_hash from settlement_transactions t join settlement_attempts a on a.id = t.attempt_id where a.session_id = ?', [s.id]);
      const ourReceipt = await chain.client.getTransactionReceipt({ hash: ours!.tx_hash as Hex });
      expect(ourReceipt.status).toBe('reverted');
      expect(ourReceipt.blockNumber).toBe(cancelReceipt.blockNumber);

      startWorker();
      const view = await pollPastSettling(s.id);
      expect(view.body.state).toBe('awaiting_payment');
      expect(view.body.orderId).toBeNull();
      expect(view.body.paymentError).toEqual({ reasonCodes: ['NONCE_ALREADY_USED'], errorHuman: expect.stringContaining(`canceled this authorization on chain (cancelAuthorization, transaction ${cancel}`) });
      expect(view.body.receipt).toBeNull();
      expect(await ordersOf(app, s.id)).toHaveLength(0);
      expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(0);
      expect(await eventTypes(app, s.id)).toEqual([]);
      expect(await countRows('settlement_attempts', "session_id = ? and status = 'failed'", [s.id])).toBe(1);
      // a used nonce, like any replay, counts against the agent
      expect(await sql(app, 'select subject_type, reason from reputation_events where session_id = ?', [s.id])).toEqual([{ subject_type: 'agent', reason: 'replay_attempt' }]);
      expect(await chain.usdcBalance(payTo)).toBe(before);
      expect(await chain.usdcBalance(buyer.address)).toBe(100_000_000n);
    });
  });

  it('GIVEN a live settle WHEN the transfer is mined THEN phase 1 writes the attempt and the session in one statement and phase 3 is one statement after the broadcast: 8 statements in all for the settle (the merchant and the session read by one statement)', async () => {
    const buyer = await fundedBuyer();
    const warm = await openLive();
    expect((await settle(app, base, warm.id, await signPayment(buyer, warm.pr))).status).toBe(200);
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    const counter = await countQueries(app.services.orm);
    let res: Awaited<ReturnType<typeof settle>>;
    try {
      res = await settle(app, base, s.id, payment);
    } finally {
      counter.stop();
    }
    expect(res.status, res.text).toBe(200);
    const listing = counter.statements.map((t, i) => `${i + 1}. ${t}`).join('\n');
    const broadcast = counter.statements.findIndex((t) => t.startsWith('insert into settlement_transactions'));
    expect(broadcast, listing).toBeGreaterThan(0);
    // after the broadcast's record, the one write (computed from the session phase 1 wrote)
    expect(counter.statements.slice(broadcast + 1), listing).toEqual([expect.stringMatching(/^with a as \( ?update settlement_attempts/)]);
    expect(counter.statements.filter((t) => /^with a as \( ?insert into settlement_attempts/.test(t)), listing).toHaveLength(1);
    expect(counter.count, listing).toBeLessThanOrEqual(8);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(1);
    expect(await sql(app, 'select subject_type, reason from reputation_events where session_id = ? order by subject_type', [s.id])).toEqual([
      { subject_type: 'agent', reason: 'accepted' },
      { subject_type: 'merchant', reason: 'settled_merchant' },
    ]);
  });

  it('GIVEN a pending live attempt whose transfer is mined WHEN two resolvers write phase 3 at once THEN one order, one receipt and one pair of events, both report the same accepted result, and a late write changes nothing', async () => {
    const buyer = await fundedBuyer();
    const s = await openLive();
    await chain.setAutomine(false);
    const realWait = app.services.config.SVC_SETTLE_WAIT_MS;
    (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = 500;
    try {
      const res = await settle(app, base, s.id, await signPayment(buyer, s.pr));
      expect(res.status, res.text).toBe(202);
    } finally {
      (app.services.config as { SVC_SETTLE_WAIT_MS: number }).SVC_SETTLE_WAIT_MS = realWait;
      await chain.mine();
      await chain.setAutomine(true);
    }
    const [attempt] = await sql<{ id: string; status: string }>(app, 'select id, status from settlement_attempts where session_id = ?', [s.id]);
    expect(attempt!.status).toBe('pending');
    const [tx] = await sql<{ tx_hash: string }>(app, 'select tx_hash from settlement_transactions where attempt_id = ?', [attempt!.id]);
    const settled = { status: 'settled' as const, reference: tx!.tx_hash };
    const both = await Promise.all([resolveAttempt(app.services, attempt!.id, settled), resolveAttempt(app.services, attempt!.id, settled)]);
    for (const r of both) expect(r.kind).toBe('accepted');
    const [a, b] = both.map((r) => (r.kind === 'accepted' ? r.result.body : null));
    expect(a).toEqual(b);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(1);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);

    // The write itself refuses a resolved attempt: nothing of a late writer lands.
    const late = await writeAcceptedAttempt(app.services.orm.em.fork(), {
      attempt: { pendingId: attempt!.id },
      reference: tx!.tx_hash,
      now: new Date(),
      order: { ...(await app.services.orm.em.fork().findOneOrFail(OrderEntity, { sessionId: s.id })), id: 'ord_late', receiptId: 'rcpt_late' },
      receipt: { id: 'rcpt_late', orderId: 'ord_late', sessionId: s.id, merchantId, jws: 'x', claims: {}, createdAt: new Date() },
      sessionId: s.id,
      session: { settledAt: new Date(), orderId: 'ord_late', receiptId: 'rcpt_late', settlementRef: tx!.tx_hash, verdict: null, settlePaymentHash: 'x', settleStatus: 200, settleResponse: '{}', policyVersion: 9, policyHash: 'x', payment: null },
      events: app.services.events.prepare([{ type: 'order.settled', projectId: 'proj_x', merchantId, livemode: true, object: { id: 'ord_late' } as never }]).rows,
      fanOutCtes: app.services.events.fanOutCtes,
      deltas: [{ sessionId: `${s.id}_late`, livemode: true, subjectType: 'agent', subjectId: 'late', delta: 10, reason: 'accepted' }],
      neutralScore: 500,
    });
    expect(late).toEqual({ accepted: false, fanned: [] });
    expect(await countRows('orders', "id = 'ord_late'", [])).toBe(0);
    expect(await countRows('receipts', "id = 'rcpt_late'", [])).toBe(0);
    expect(await countRows('reputation_events', 'session_id = ?', [`${s.id}_late`])).toBe(0);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    expect((await poll(app, base, s.id)).body).toMatchObject({ state: 'accepted', settlement: { reference: tx!.tx_hash } });
    expect((await ordersOf(app, s.id))[0]).toMatchObject({ id: a!.order_id });
  });

  it('GIVEN a held live order approved after its authorization expired WHEN the agent waits THEN it signs again and the order settles on chain', async () => {
    const pol = await app.request('PUT', `/v1/policy?merchant_id=${merchantId}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: 'standard' } } });
    expect(pol.status).toBe(201);
    expect((await app.request('POST', `/v1/publish?merchant_id=${merchantId}`, { key })).status).toBe(200);
    try {
      const buyer = await fundedBuyer();
      const agent = new AgentClient({ account: buyer, agentId: randomUUID() });
      const shop = await agent.discover(`${app.baseUrl}${base}`);
      const held = await shop.buy([{ sku: 'beans', qty: 1 }]);
      if (held.status !== 'hold') throw new Error(JSON.stringify(held));
      const before = await chain.usdcBalance(payTo);
      const realNow = app.services.now;
      app.services.now = () => new Date(Date.now() + 3_600_000);
      let approved;
      try {
        approved = await app.request('POST', `/v1/sessions/${held.session_id}/approve`, { key });
      } finally {
        app.services.now = realNow;
      }
      expect(approved.status, approved.text).toBe(202);
      expect(approved.body.status).toBe('awaiting_reauthorization');
      const resolved = await held.waitForResolution({ intervalMs: 100, timeoutMs: 60_000 });
      if (resolved.status !== 'accepted') throw new Error(JSON.stringify(resolved));
      expect((await chain.client.getTransactionReceipt({ hash: resolved.fulfillment.reference as Hex })).status).toBe('success');
      expect(await chain.usdcBalance(payTo)).toBe(before + 12_000_000n);
      expect(await eventTypes(app, held.session_id)).toEqual(['order.held', 'order.accepted', 'order.settled']);
    } finally {
      await app.request('PUT', `/v1/policy?merchant_id=${merchantId}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } });
      await app.request('POST', `/v1/publish?merchant_id=${merchantId}`, { key });
    }
  });

  it('GIVEN the relayers WHEN /readyz is read THEN it reports the onchain facilitator, the chain and each relayer balance, without secrets', async () => {
    const res = await app.request('GET', '/readyz');
    expect(res.status).toBe(200);
    expect(res.body.live).toMatchObject({ facilitator: 'onchain', ok: true });
    for (const k of relayerKeys) {
      expect(res.text).toContain(privateKeyToAccount(k).address);
      expect(res.text).not.toContain(k.slice(2));
    }
  });
});

/**
 * A third party carries the buyer's own signed authorization on chain (anyone may send a
 * transferWithAuthorization): the merchant is paid exactly as the authorization says, by a
 * transaction that is not ours. The first session that presents that authorization is
 * accepted with that transaction as its reference, once (docs/decisions.md, "Front-run payments").
 */
describe('live mode: a payment carried on chain by someone else (front-run)', () => {
  /** The front-runner's transaction, mined; the buyer paid exactly the amount to the merchant. */
  async function frontRun(p: SignedPayment): Promise<Hex> {
    const hash = await chain.sendAuthorization(proofOf(p));
    expect((await chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 })).status).toBe('success');
    return hash;
  }

  it('GIVEN the buyer\'s authorization carried on chain by a third party before the settle WHEN the agent settles THEN 200 accepted with that transaction as the reference, one order, one receipt, one order.settled, nothing sent by us; another session presenting it gets 402 NONCE_ALREADY_USED', async () => {
    const buyer = await fundedBuyer();
    const merchantBefore = await chain.usdcBalance(payTo);
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    const hash = await frontRun(payment);
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore + 4_500_000n);
    const sentBefore = await relayerTxCount();

    const res = await settle(app, base, s.id, payment);
    expect(res.status, res.text).toBe(200);
    expect(res.body).toMatchObject({ status: 'accepted', fulfillment: { reference: hash } });
    expect(await ordersOf(app, s.id)).toEqual([expect.objectContaining({ decision: 'accept', settlement_ref: hash })]);
    expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(1);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    expect(await sql(app, 'select status, reference from settlement_attempts where session_id = ?', [s.id])).toEqual([{ status: 'settled', reference: hash }]);
    expect((await poll(app, base, s.id)).body).toMatchObject({ state: 'accepted', settlement: { rail: 'x402', reference: hash } });
    // the settle sent nothing: the funds had moved already
    expect(await relayerTxCount()).toBe(sentBefore);
    expect(await countRows('settlement_transactions t join settlement_attempts a on a.id = t.attempt_id', 'a.session_id = ?', [s.id])).toBe(0);
    // the agent's repeated settle replays the accepted result
    expect((await settle(app, base, s.id, payment)).text).toBe(res.text);

    // the same authorization on another session of the same merchant and amount: the transfer is taken
    const other = await openLive();
    const again = await settle(app, base, other.id, payment);
    expect(again.status, again.text).toBe(402);
    expect(again.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    expect(await ordersOf(app, other.id)).toHaveLength(0);
    expect((await poll(app, base, other.id)).body.state).toBe('awaiting_payment');
    expect(await chain.usdcBalance(payTo)).toBe(merchantBefore + 4_500_000n);
    expect(await chain.usdcBalance(buyer.address)).toBe(100_000_000n - 4_500_000n);
  });

  it('GIVEN one front-run authorization WHEN two sessions present it at once THEN one is accepted with the front-runner\'s transaction and the other answers 402 NONCE_ALREADY_USED: one order in all', async () => {
    const buyer = await fundedBuyer();
    const [a, b] = await Promise.all([openLive(), openLive()]);
    const payment = await signPayment(buyer, a!.pr);
    const hash = await frontRun(payment);
    const results = await Promise.all([a!, b!].map((s) => settle(app, base, s.id, payment)));
    expect(results.map((r) => r.status).sort(), results.map((r) => r.text).join('\n')).toEqual([200, 402]);
    const won = results.find((r) => r.status === 200)!;
    expect(won.body.fulfillment.reference).toBe(hash);
    expect(results.find((r) => r.status === 402)!.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    const orders = [...(await ordersOf(app, a!.id)), ...(await ordersOf(app, b!.id))];
    expect(orders).toEqual([expect.objectContaining({ decision: 'accept', settlement_ref: hash })]);
    expect(await countRows('settlement_attempts', "status = 'settled' and reference = ?", [hash])).toBe(1);
  });

  it('GIVEN a session accepted on a front-run transfer whose nonce reservation is gone WHEN another session presents the authorization THEN the settled attempt still holds it: 402 NONCE_ALREADY_USED, never a second order or a 500', async () => {
    const buyer = await fundedBuyer();
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    const hash = await frontRun(payment);
    expect((await settle(app, base, s.id, payment)).status).toBe(200);
    // whatever path released the replay reservation, the attempt's unique (chain, payer, nonce) index remains
    await sql(app, 'delete from payment_nonces where session_id = ?', [s.id]);
    const other = await openLive();
    const again = await settle(app, base, other.id, payment);
    expect(again.status, again.text).toBe(402);
    expect(again.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    expect(await ordersOf(app, other.id)).toHaveLength(0);
    expect((await poll(app, base, other.id)).body.state).toBe('awaiting_payment');
    expect(await countRows('settlement_attempts', "status = 'settled' and reference = ?", [hash])).toBe(1);
  });

  it('GIVEN a live settle in flight WHEN a third party carries the same authorization ahead of our transfer (ours reverts) THEN the session is accepted with the front-runner\'s transaction, once, and the amount moved once', async () => {
    const buyer = await fundedBuyer();
    const before = await chain.usdcBalance(payTo);
    const s = await openLive();
    const payment = await signPayment(buyer, s.pr);
    await onSlowChain(async (startWorker) => {
      const res = await settle(app, base, s.id, payment);
      expect(res.status, res.text).toBe(202);
      // ours is in the pool; the front-runner's, with a far higher tip, goes ahead of it in the block
      const theirs = await chain.sendAuthorization(proofOf(payment), { gas: 200_000n, tipGwei: 100n });
      await chain.mine();
      const [ours] = await sql<{ tx_hash: Hex }>(app, 'select t.tx_hash from settlement_transactions t join settlement_attempts a on a.id = t.attempt_id where a.session_id = ?', [s.id]);
      const [theirReceipt, ourReceipt] = await Promise.all([theirs, ours!.tx_hash].map((hash) => chain.client.getTransactionReceipt({ hash })));
      expect([theirReceipt!.status, ourReceipt!.status]).toEqual(['success', 'reverted']);

      startWorker();
      const view = await pollPastSettling(s.id);
      expect(view.body).toMatchObject({ state: 'accepted', settlement: { reference: theirs } });
      expect(await ordersOf(app, s.id)).toEqual([expect.objectContaining({ settlement_ref: theirs })]);
      expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(1);
      expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
      expect(await chain.usdcBalance(payTo)).toBe(before + 4_500_000n);
    });
  });

  it('GIVEN a held live order whose authorization a third party carried on chain WHEN the merchant approves THEN the order is accepted with that transaction and nothing is sent again', async () => {
    const pol = await app.request('PUT', `/v1/policy?merchant_id=${merchantId}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: 'standard' } } });
    expect(pol.status).toBe(201);
    expect((await app.request('POST', `/v1/publish?merchant_id=${merchantId}`, { key })).status).toBe(200);
    try {
      const buyer = await fundedBuyer();
      const s = await openLive();
      const payment = await signPayment(buyer, s.pr);
      const held = await settle(app, base, s.id, payment);
      expect(held.status, held.text).toBe(202);
      expect(held.body.status).toBe('hold');
      const hash = await frontRun(payment);
      const sentBefore = await relayerTxCount();
      const approved = await app.request('POST', `/v1/sessions/${s.id}/approve`, { key });
      expect(approved.status, approved.text).toBe(200);
      expect((await poll(app, base, s.id)).body).toMatchObject({ state: 'accepted', settlement: { reference: hash } });
      expect(await eventTypes(app, s.id)).toEqual(['order.held', 'order.accepted', 'order.settled']);
      expect(await countRows('receipts', 'session_id = ?', [s.id])).toBe(1);
      expect(await relayerTxCount()).toBe(sentBefore);
    } finally {
      await app.request('PUT', `/v1/policy?merchant_id=${merchantId}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } });
      await app.request('POST', `/v1/publish?merchant_id=${merchantId}`, { key });
    }
  });

  for (const spoiler of ['another value to this merchant', 'this value to another address'] as const) {
    it(`GIVEN the buyer's nonce spent on chain by another authorization of theirs (${spoiler}) WHEN the agent settles THEN 402 NONCE_ALREADY_USED, no order, and only the other transfer moved`, async () => {
      const buyer = await fundedBuyer();
      const s = await openLive();
      const payment = await signPayment(buyer, s.pr);
      const nonce = payment.payment.authorization.nonce;
      const elsewhere = privateKeyToAccount(generatePrivateKey()).address;
      const spent = spoiler === 'another value to this merchant' ? await signPayment(buyer, s.pr, { nonce, value: '4499999' }) : await signPayment(buyer, s.pr, { nonce, to: elsewhere });
      const before = await chain.usdcBalance(payTo);
      const hash = await chain.sendAuthorization(proofOf(spent));
      expect((await chain.client.waitForTransactionReceipt({ hash, pollingInterval: 50 })).status).toBe('success');
      const res = await settle(app, base, s.id, payment);
      expect(res.status, res.text).toBe(402);
      expect(res.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
      expect(res.body.error_human).toContain(hash);
      expect(await ordersOf(app, s.id)).toHaveLength(0);
      expect((await poll(app, base, s.id)).body.state).toBe('awaiting_payment');
      expect(await chain.usdcBalance(payTo)).toBe(before + (spoiler === 'another value to this merchant' ? 4_499_999n : 0n));
    });
  }
});

describe('the velocity limits count payments still settling on chain', () => {
  it('GIVEN a live merchant allowing one order per agent per hour and a first payment still settling WHEN the agent pays a second session THEN RATE_LIMITED_HOURLY, and only the first moves funds', async () => {
    const shop = await publishedMerchant(app, {
      key,
      merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
      products: [{ sku: 'coffee', amount: '4.50' }],
      policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null, ratePerAgentPerHour: 1 },
    });
    const agent = randomUUID();
    const open = async () => {
      const r = await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'coffee', qty: 1 }] } });
      expect(r.status, r.text).toBe(201);
      return { id: r.body.session_id as string, pr: r.body.payment_required };
    };
    const buyer = await fundedBuyer();
    const before = await chain.usdcBalance(payTo);
    const first = await open();
    const second = await open();
    await onSlowChain(async (startWorker) => {
      const pending = await settle(app, shop.base, first.id, await signPayment(buyer, first.pr));
      expect(pending.status, pending.text).toBe(202);
      expect((await poll(app, shop.base, first.id)).body.state).toBe('settling');

      // WHEN the agent's second session is paid while the first is in flight
      const res = await settle(app, shop.base, second.id, await signPayment(buyer, second.pr));
      expect(res.status, res.text).toBe(403);
      expect(res.body).toMatchObject({ status: 'rejected', reason_codes: ['RATE_LIMITED_HOURLY'] });

      await chain.mine();
      startWorker();
      expect((await pollPastSettling(first.id, shop.base)).body.state).toBe('accepted');
    });
    expect(await ordersOf(app, first.id)).toEqual([expect.objectContaining({ decision: 'accept', settlement_ref: expect.stringMatching(/^0x/) })]);
    expect(await ordersOf(app, second.id)).toEqual([expect.objectContaining({ decision: 'reject', settlement_ref: null })]);
    expect(await chain.usdcBalance(payTo)).toBe(before + 4_500_000n);
  });
});
