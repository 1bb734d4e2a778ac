import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { startAnvil, type Anvil } from './helpers/anvil.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { newBuyer, publishedMerchant } from './helpers/agent.js';
import type { TestApp, TestKey } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';

/**
 * Issue 24 item 2, the attack as it was run: a stranger's free keys report ingest outcomes
 * about agents (naming a merchant nobody knows) to sink one agent and lift another, then those
 * agents buy from another project's live merchants on a real chain (anvil). Reputation is kept
 * per mode, and an ingest report counts only in the view of the project that sent it.
 */
let chain: Anvil;
let app: TestApp;
/** Project A: the victim merchant's live key and its live merchants. */
let a: TestKey;
let standardShop: string;
let trustedShop: string;

const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';
const NEUTRAL = { score: 500, tier: 'standard', known: false };
const LIVE_POLICY = { requireMandateOverUsd: null, holdForReviewBelowTier: null };

async function liveShop(key: TestKey, minReputationTier: string) {
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
    products: [{ sku: 'coffee', amount: '4.50' }],
    policy: { ...LIVE_POLICY, minReputationTier },
  });
  return shop.base;
}

async function fundedBuyer(): Promise<PrivateKeyAccount> {
  const buyer = privateKeyToAccount(generatePrivateKey());
  await chain.mintUsdc(buyer.address as Address, 100_000_000n);
  return buyer;
}

/** THEN-helper: the gate refused the settle for the agent's reputation. */
function expectRefusedForReputation(res: { status: number; body: any; text: string }) {
  expect(res.status, res.text).toBe(403);
  expect(res.body).toMatchObject({ status: 'rejected', reason_codes: ['REPUTATION_TOO_LOW'] });
}

function expectRefusedOverCap(res: { status: number; body: any; text: string }) {
  expect(res.status, res.text).toBe(403);
  expect(res.body.reason_codes).toEqual(['OVER_PER_TX_CAP']);
}

/** The agent buys one coffee at `base` and pays with a funded wallet: the gate decides. */
async function buy(base: string, agent: string) {
  const s = await openSession(app, base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent });
  return (await payX402(app, base, s, await fundedBuyer())).res;
}

const sessionId = () => `sess_ext_${randomUUID()}`;
const elsewhere = (agentId: string, over: Record<string, unknown> = {}) => ({
  id: sessionId(),
  merchantId: 'shop-nobody-knows',
  agentId,
  total: { currency: 'USD', subtotal: '1.00', tax: '0.00', total: '1.00' },
  lines: [{ sku: 'x', qty: 1 }],
  ...over,
});

/** `n` rejections of `agent` reported by `key`; answers the last report's reputation. */
async function reportRejections(key: TestKey, agent: string, n: number) {
  let last: any;
  for (let i = 0; i < n; i++) {
    const r = await app.request('POST', '/v1/ingest/decision', { key, body: { session: elsewhere(agent, { state: 'rejected', verdict: { decision: 'reject', reasonCodes: ['AGENT_BLOCKED'] } }) } });
    expect(r.status, r.text).toBe(200);
    last = r.body.reputation;
  }
  return last;
}

/** `n` accepted orders of `agent` reported by `key`; answers the last report's reputation. */
async function reportOrders(key: TestKey, agent: string, n: number) {
  let last: any;
  for (let i = 0; i < n; i++) {
    const session = elsewhere(agent, { state: 'accepted', verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] } });
    const r = await app.request('POST', '/v1/ingest/order', { key, body: { session, receipt: RECEIPT, settlement: { reference: `0x${randomUUID().replace(/-/g, '')}` } } });
    expect(r.status, r.text).toBe(201);
    last = r.body.reputation;
  }
  return last;
}

const read = async (agent: string, key?: TestKey) => (await app.request('GET', `/v1/reputation/agent/${agent}`, key ? { key } : {})).body;

beforeAll(async () => {
  chain = await startAnvil();
  app = await startLiveApp(chain, [generatePrivateKey(), generatePrivateKey()]);
  a = await app.key('live');
  standardShop = await liveShop(a, 'standard');
  trustedShop = await liveShop(a, 'trusted');
}, 120_000);
afterAll(async () => {
  await app?.stop();
  await chain?.stop();
});

describe('a test key never moves live reputation (issue 24.2)', () => {
  it('GIVEN project B\'s test key reports 10 rejections of X and 35 orders of Y at an unknown merchant WHEN project A\'s live merchants gate X and Y THEN X is accepted and Y is not passed as trusted', async () => {
    const b = await app.key('test');
    const x = randomUUID();
    const y = randomUUID();

    // The reports land in B's own test view: X risky at 350, Y elite at 850, as in the issue.
    expect(await reportRejections(b, x, 10)).toEqual({ agentId: x, score: 350, tier: 'risky' });
    expect(await reportOrders(b, y, 35)).toEqual({ agentId: y, score: 850, tier: 'elite' });
    expect(await read(x, b)).toEqual({ agentId: x, score: 350, tier: 'risky', known: true });

    // Live mode reads nothing of it: anonymous reads and A's live key see the neutral default.
    for (const key of [undefined, a]) {
      expect(await read(x, key)).toEqual({ agentId: x, ...NEUTRAL });
      expect(await read(y, key)).toEqual({ agentId: y, ...NEUTRAL });
    }

    // X buys from A's live merchant (standard required): accepted, paid on chain.
    const xBuys = await buy(standardShop, x);
    expect(xBuys.status, xBuys.text).toBe(200);
    expect(xBuys.body.status).toBe('accepted');
    // Y is a neutral live agent: a merchant that requires trusted refuses it.
    expectRefusedForReputation(await buy(trustedShop, y));

    // X's live purchase moved the live score only; B's test view is where it was.
    expect(await read(x)).toEqual({ agentId: x, score: 510, tier: 'standard', known: true });
    expect(await read(x, b)).toEqual({ agentId: x, score: 350, tier: 'risky', known: true });
  });

  it('GIVEN an agent rejected at a hosted test merchant until it is risky there WHEN it buys from project A\'s live merchant THEN the live gate reads the live score (accepted), and the live purchase leaves the test score alone', async () => {
    const tester = await publishedMerchant(app, { policy: { ...LIVE_POLICY, maxPerTransactionUsd: 1 } });
    const v = randomUUID();
    for (let i = 0; i < 7; i++) {
      const s = await openSession(app, tester.base, [{ sku: 'coffee', qty: 1 }], { agent_id: v });
      expectRefusedOverCap((await payX402(app, tester.base, s, newBuyer())).res);
    }
    expect(await read(v, tester.key)).toEqual({ agentId: v, score: 395, tier: 'risky', known: true });
    expect(await read(v)).toEqual({ agentId: v, ...NEUTRAL });

    const vBuys = await buy(standardShop, v);
    expect(vBuys.status, vBuys.text).toBe(200);
    expect(await read(v)).toEqual({ agentId: v, score: 510, tier: 'standard', known: true });
    expect(await read(v, tester.key)).toEqual({ agentId: v, score: 395, tier: 'risky', known: true });
  });

  it('GIVEN project C\'s live key reports rejections of Z and orders of W WHEN project A\'s live gate reads them THEN nothing moved there, while C\'s own live gate reads its reports', async () => {
    const c = await app.key('live');
    const z = randomUUID();
    const w = randomUUID();
    expect(await reportRejections(c, z, 10)).toEqual({ agentId: z, score: 350, tier: 'risky' });
    expect(await reportOrders(c, w, 35)).toEqual({ agentId: w, score: 850, tier: 'elite' });

    // The shared live score and A's view are untouched; C's key reads its own view.
    expect(await read(z)).toEqual({ agentId: z, ...NEUTRAL });
    expect(await read(z, a)).toEqual({ agentId: z, ...NEUTRAL });
    expect(await read(z, c)).toEqual({ agentId: z, score: 350, tier: 'risky', known: true });
    expect(await read(w)).toEqual({ agentId: w, ...NEUTRAL });

    // A's live gate: Z is not refused, W is not lifted to trusted.
    const zAtA = await buy(standardShop, z);
    expect(zAtA.status, zAtA.text).toBe(200);
    expectRefusedForReputation(await buy(trustedShop, w));

    // C's own live merchant reads C's reports (the project's overlay): Z is risky there.
    const cShop = await liveShop(c, 'standard');
    expectRefusedForReputation(await buy(cShop, z));
  });
});
