import type { Server } from 'node:http';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { AgentClient } from '../../sdk/src/index.js';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { eventTypes, ordersOf, poll, settle } from './helpers/agent-protocol.js';
import { publishedMerchant, signPayment } from './helpers/agent.js';
import { TestApp, type TestKey } from './helpers/harness.js';
import { startX402Facilitator, X402_FACILITATOR_TOKEN, type Knobs } from './helpers/x402-facilitator.js';

/**
 * Live mode through the `remote` strategy end to end: our server, configured with
 * SVC_LIVE_FACILITATOR=remote, settles through a stock x402 facilitator (@x402/core's
 * x402Facilitator with @x402/evm's exact scheme) served over HTTP on the same anvil chain.
 */
let chain: Anvil;
let facilitator: { url: string; server: Server };
const knobs: Knobs = { settleDelayMs: 0, seenAuth: [], calls: [] };
let app: TestApp;
let key: TestKey;
let payTo: Address;
let base: string;

beforeAll(async () => {
  chain = await startAnvil();
  facilitator = await startX402Facilitator(chain, knobs);
  app = await TestApp.start({
    SVC_LIVE_FACILITATOR: 'remote',
    SVC_FACILITATOR_URL: facilitator.url,
    SVC_FACILITATOR_AUTH_HEADER: `Authorization: Bearer ${X402_FACILITATOR_TOKEN}`,
    SVC_RPC_URL_BASE: chain.rpcUrl,
  });
  key = await app.key('live');
  payTo = privateKeyToAccount(generatePrivateKey()).address;
  const m = await app.request('POST', '/v1/merchants', {
    key,
    body: { slug: `remote-${randomUUID().slice(0, 8)}`, name: 'Remote Shop', domain: 'remote.example.com', receiving: { x402: { chain: 'base', address: payTo } } },
  });
  expect(m.status, m.text).toBe(201);
  base = `/m/${m.body.id}`;
  const q = `?merchant_id=${m.body.id}`;
  expect((await app.request('POST', `/v1/catalog${q}`, { key, body: { sku: 'map', name: 'Map', price: { amount: '2.75', currency: 'USD' } } })).status).toBe(201);
  expect((await app.request('PUT', `/v1/policy${q}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } })).status).toBe(201);
  expect((await app.request('POST', `/v1/publish${q}`, { key })).status).toBe(200);
}, 120_000);
afterAll(async () => {
  await app?.stop();
  facilitator?.server.close();
  await chain?.stop();
});

describe('live mode through a remote x402 facilitator', () => {
  it('GIVEN a live merchant and SVC_LIVE_FACILITATOR=remote WHEN an agent buys with the SDK THEN the facilitator settles on chain, balances move exactly and the order and events exist once', async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const agent = new AgentClient({ account: buyer, agentId: randomUUID() });
    const shop = await agent.discover(`${app.baseUrl}${base}`);
    const outcome = await shop.buy([{ sku: 'map', qty: 1 }]);
    if (outcome.status !== 'accepted') throw new Error(JSON.stringify(outcome));
    const hash = outcome.fulfillment.reference as Hex;
    const receipt = await chain.client.getTransactionReceipt({ hash });
    expect(receipt.status).toBe('success');
    expect(receipt.to?.toLowerCase()).toBe(USDC_BASE.toLowerCase());
    expect(await chain.usdcBalance(payTo)).toBe(2_750_000n);
    expect(await chain.usdcBalance(buyer.address)).toBe(7_250_000n);
    expect((await shop.verifyReceipt(outcome.receipt)).settlementRef).toBe(hash);
    expect(await ordersOf(app, outcome.session_id)).toHaveLength(1);
    expect(await eventTypes(app, outcome.session_id)).toEqual(['order.accepted', 'order.settled']);
    // It went through the facilitator's HTTP API, with the configured credentials.
    expect(knobs.calls).toEqual(expect.arrayContaining(['POST /verify', 'POST /settle']));
    expect(knobs.seenAuth.every((a) => a === `Bearer ${X402_FACILITATOR_TOKEN}`)).toBe(true);
  });

  it('GIVEN an unfunded buyer WHEN it settles THEN the facilitator refusal reaches the agent as 402 INSUFFICIENT_FUNDS and nothing moves', async () => {
    const before = await chain.usdcBalance(payTo);
    const poor = privateKeyToAccount(generatePrivateKey());
    const s = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'map', qty: 1 }] } });
    expect(s.status, s.text).toBe(201);
    const res = await settle(app, base, s.body.session_id, await signPayment(poor, s.body.payment_required));
    expect(res.status, res.text).toBe(402);
    expect(res.body.reason_codes).toEqual(['INSUFFICIENT_FUNDS']);
    expect(await chain.usdcBalance(payTo)).toBe(before);
    expect(await ordersOf(app, s.body.session_id)).toHaveLength(0);
  });

  it('GIVEN the buyer\'s authorization carried on chain by a third party before the settle WHEN the agent settles through the remote facilitator THEN 200 accepted with that transaction as the reference, one order, one order.settled, no /settle call; another session presenting it gets 402 NONCE_ALREADY_USED', async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const before = await chain.usdcBalance(payTo);
    const open = async () => {
      const r = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'map', qty: 1 }] } });
      expect(r.status, r.text).toBe(201);
      return r.body as { session_id: string; payment_required: Parameters<typeof signPayment>[1] };
    };
    const s = await open();
    const payment = await signPayment(buyer, s.payment_required);
    const a = payment.payment.authorization;
    const theirs = await chain.sendAuthorization({ chain: 'base', payTo: a.to, amountBaseUnits: a.value, authorization: a, signature: payment.payment.signature });
    expect((await chain.client.waitForTransactionReceipt({ hash: theirs, pollingInterval: 50 })).status).toBe('success');
    const settleCalls = () => knobs.calls.filter((c) => c === 'POST /settle').length;
    const settlesBefore = settleCalls();

    const res = await settle(app, base, s.session_id, payment);
    expect(res.status, res.text).toBe(200);
    expect(res.body.fulfillment.reference).toBe(theirs);
    expect(await ordersOf(app, s.session_id)).toEqual([expect.objectContaining({ decision: 'accept', settlement_ref: theirs })]);
    expect(await eventTypes(app, s.session_id)).toEqual(['order.accepted', 'order.settled']);
    expect(settleCalls()).toBe(settlesBefore);

    const other = await open();
    const again = await settle(app, base, other.session_id, payment);
    expect(again.status, again.text).toBe(402);
    expect(again.body.reason_codes).toEqual(['NONCE_ALREADY_USED']);
    expect(await ordersOf(app, other.session_id)).toHaveLength(0);
    expect(await chain.usdcBalance(payTo)).toBe(before + 2_750_000n);
  });
});

describe('a remote facilitator that refuses the settle before doing anything', () => {
  const reputationOf = async (agent: string) => (await app.request('GET', `/v1/reputation/agent/${agent}`)).body.score as number;
  const refusing = async <T>(fn: () => Promise<T>) => {
    knobs.settleStatus = 403;
    try {
      return await fn();
    } finally {
      knobs.settleStatus = undefined;
    }
  };
  const fundedBuyer = async () => {
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    return buyer;
  };

  it('GIVEN /settle refused (nothing sent) WHEN an agent settles THEN 503 FACILITATOR_UNAVAILABLE, the session is handed back unpaid at no cost to the agent, and the same payment settles once the facilitator takes it', async () => {
    const agent = randomUUID();
    const s = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: agent, items: [{ sku: 'map', qty: 1 }] } });
    expect(s.status, s.text).toBe(201);
    const payment = await signPayment(await fundedBuyer(), s.body.payment_required);
    const score = await reputationOf(agent);
    const before = await chain.usdcBalance(payTo);

    const refused = await refusing(() => settle(app, base, s.body.session_id, payment));
    expect(refused.status, refused.text).toBe(503);
    expect(refused.body.reason_codes).toEqual(['FACILITATOR_UNAVAILABLE']);
    expect((await poll(app, base, s.body.session_id)).body.state).toBe('awaiting_payment');
    expect(await reputationOf(agent)).toBe(score);
    expect(await ordersOf(app, s.body.session_id)).toHaveLength(0);

    const paid = await settle(app, base, s.body.session_id, payment);
    expect(paid.status, paid.text).toBe(200);
    expect(await chain.usdcBalance(payTo)).toBe(before + 2_750_000n);
    expect(await ordersOf(app, s.body.session_id)).toHaveLength(1);
  });

  it('GIVEN a held live order WHEN the merchant approves while /settle is refused THEN 503 and the session is still held for review; approving again settles it once', async () => {
    const heldShop = await publishedMerchant(app, {
      key,
      merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
      products: [{ sku: 'map', amount: '2.75' }],
      // a new agent (cautious) is below standard: held
      policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: 'standard' },
    });
    const s = await app.request('POST', `${heldShop.base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'map', qty: 1 }] } });
    expect(s.status, s.text).toBe(201);
    const held = await settle(app, heldShop.base, s.body.session_id, await signPayment(await fundedBuyer(), s.body.payment_required));
    expect(held.status, held.text).toBe(202);
    const before = await chain.usdcBalance(payTo);

    const refused = await refusing(() => app.request('POST', `/v1/sessions/${s.body.session_id}/approve`, { key }));
    expect(refused.status, refused.text).toBe(503);
    expect((await poll(app, heldShop.base, s.body.session_id)).body.state).toBe('held');

    const approved = await app.request('POST', `/v1/sessions/${s.body.session_id}/approve`, { key });
    expect(approved.status, approved.text).toBe(200);
    expect(await chain.usdcBalance(payTo)).toBe(before + 2_750_000n);
    expect(await eventTypes(app, s.body.session_id)).toEqual(['order.held', 'order.accepted', 'order.settled']);
  });
});
