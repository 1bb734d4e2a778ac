import { randomUUID } from 'node:crypto';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { poll, settle } from './helpers/agent-protocol.js';
import { publishedMerchant, signPayment } from './helpers/agent.js';
import { expectError, sql } from './helpers/foundation.js';
import type { TestApp } from './helpers/harness.js';
import { startLiveApp } from './helpers/live.js';
import { startSettlementWorker } from '../src/modules/settlement/reconciler.js';

/**
 * Live mode on a chain that is not the one the manifest advertises (a fresh anvil, an RPC URL
 * of another network, another token at the USDC address): /readyz says so in one line, and a
 * live settle answers 503 FACILITATOR_UNAVAILABLE naming the cause before anything is signed or
 * sent. The check is cached: fixing the chain is seen without a restart (docs/decisions.md,
 * "Live mode checks its chain").
 */
type Line = { level: number; msg: string };

/** A live app on `chain` whose log lines are kept, with a published live merchant. */
async function liveShop(chain: Anvil) {
  const lines: Line[] = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Line) });
  const keys = [generatePrivateKey()];
  const app = await startLiveApp(chain, keys, {}, { log });
  const key = await app.key('live');
  const payTo = privateKeyToAccount(generatePrivateKey()).address;
  const shop = await publishedMerchant(app, {
    key,
    merchant: { receiving: { x402: { chain: 'base', address: payTo } } },
    products: [{ sku: 'coffee', amount: '4.50' }],
    policy: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null },
  });
  const relayer = privateKeyToAccount(keys[0]!).address;
  return { app, lines, base: shop.base, payTo, relayer };
}

async function openLive(app: TestApp, base: string) {
  const r = await app.request('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'coffee', qty: 1 }] } });
  expect(r.status, r.text).toBe(201);
  return { id: r.body.session_id as string, pr: r.body.payment_required };
}

/** What the chain has seen of us: its height and the relayer's sent transactions (the pool included). */
async function chainState(chain: Anvil, relayer: Address) {
  return {
    block: await chain.client.getBlockNumber({ cacheTime: 0 }),
    relayerSent: await chain.client.getTransactionCount({ address: relayer, blockTag: 'pending' }),
  };
}

describe('live mode on a chain without the advertised token (onchain facilitator)', () => {
  let chain: Anvil;
  let shop: Awaited<ReturnType<typeof liveShop>>;

  beforeAll(async () => {
    chain = await startAnvil({ token: 'none' });
    shop = await liveShop(chain);
  }, 120_000);
  afterAll(async () => {
    await shop?.app.stop();
    await chain?.stop();
  });

  /** Settles a fresh session with a fresh buyer's authorization; the chain must be left as it was. */
  async function settleRefused(cause: RegExp) {
    const before = await chainState(chain, shop.relayer);
    const s = await openLive(shop.app, shop.base);
    const res = await settle(shop.app, shop.base, s.id, await signPayment(privateKeyToAccount(generatePrivateKey()), s.pr));
    expectError(res, 503, 'FACILITATOR_UNAVAILABLE');
    expect(res.body.error_human).toMatch(cause);
    expect(await chainState(chain, shop.relayer)).toEqual(before);
    expect((await poll(shop.app, shop.base, s.id)).body.state).toBe('awaiting_payment');
    expect(await sql(shop.app, 'select id from settlement_attempts where session_id = ?', [s.id])).toEqual([]);
  }

  const warned = (pattern: RegExp) => shop.lines.filter((l) => l.level >= 40 && pattern.test(l.msg));

  it('GIVEN a fresh chain with no contract at the USDC address WHEN /readyz is read and agents settle THEN live.ok is false naming the cause, every settle answers 503 naming it, nothing is signed or sent, and the log does not repeat it', async () => {
    const ready = await shop.app.request('GET', '/readyz');
    expect(ready.status).toBe(200);
    expect(ready.body.live).toMatchObject({ facilitator: 'onchain', ok: false, detail: { rpc: { ok: true, chainId: 8453 }, token: { address: USDC_BASE, code: false } } });
    expect(ready.body.live.detail.cause).toMatch(/^No contract at the USDC address 0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913 on chain 8453/);
    expect(ready.body.live.detail.cause).not.toContain('\n');

    for (let i = 0; i < 8; i++) await settleRefused(/No contract at the USDC address/);
    for (let i = 0; i < 4; i++) expect((await shop.app.request('GET', '/readyz')).body.live.ok).toBe(false);
    // the node answers: nothing says it is unreachable, and the cause is not repeated per request
    expect(shop.lines.filter((l) => /unreachable/i.test(JSON.stringify(l)))).toEqual([]);
    expect(warned(/No contract/).length).toBeLessThanOrEqual(1);
  });

  it('GIVEN another token at the USDC address (another EIP-712 name; an EIP-5267 domain of another version) WHEN /readyz is read and agents settle THEN the cause names both domains, one warning per change, and settles answer 503 with nothing sent', async () => {
    await chain.installToken('other-name');
    const named = await shop.app.request('GET', '/readyz');
    expect(named.body.live).toMatchObject({ ok: false, detail: { token: { code: true, name: 'USDC', version: '2', domainFrom: 'name/version' } } });
    expect(named.body.live.detail.cause).toContain('{name: "USDC", version: "2"} (name/version), but the manifest advertises {name: "USD Coin", version: "2"}');
    for (let i = 0; i < 5; i++) await settleRefused(/the manifest advertises \{name: "USD Coin", version: "2"\}/);
    expect((await shop.app.request('GET', '/readyz')).body.live.ok).toBe(false);
    expect(warned(/\{name: "USDC", version: "2"\}/)).toHaveLength(1);

    // name() and version() say "USD Coin" / "2", but eip712Domain() (the signing domain) says version "1"
    await chain.installToken('eip5267-v1');
    const versioned = await shop.app.request('GET', '/readyz');
    expect(versioned.body.live).toMatchObject({ ok: false, detail: { token: { name: 'USD Coin', version: '1', domainFrom: 'eip712Domain' } } });
    expect(versioned.body.live.detail.cause).toContain('{name: "USD Coin", version: "1"} (eip712Domain)');
    for (let i = 0; i < 5; i++) await settleRefused(/version: "1"/);
    expect(warned(/version: "1"/)).toHaveLength(1);
  });

  it('GIVEN the token installed while the server runs WHEN /readyz is read and an agent settles THEN live.ok is true and the payment settles on chain: no restart needed', async () => {
    await chain.installToken('usdc');
    const ready = await shop.app.request('GET', '/readyz');
    expect(ready.body.live).toMatchObject({ ok: true, detail: { token: { code: true, name: 'USD Coin', version: '2', domainFrom: 'name/version' } } });
    expect(ready.body.live.detail.cause).toBeUndefined();
    expect(shop.lines.filter((l) => /chain check passes again/.test(l.msg))).toHaveLength(1);
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const s = await openLive(shop.app, shop.base);
    const res = await settle(shop.app, shop.base, s.id, await signPayment(buyer, s.pr));
    expect(res.status, res.text).toBe(200);
    expect(await chain.usdcBalance(shop.payTo)).toBe(4_500_000n);
    expect((await chain.client.getTransactionReceipt({ hash: res.body.fulfillment.reference as Hex })).status).toBe('success');
  });

  it('GIVEN a pending live attempt WHEN the token disappears from the chain under it THEN the reconciler retries every pass but warns once with the real cause, and finishes the attempt once the token is back (nothing moved: the session is handed back)', async () => {
    await chain.installToken('usdc');
    expect((await shop.app.request('GET', '/readyz')).body.live.ok).toBe(true);
    const buyer = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(buyer.address, 10_000_000n);
    const s = await openLive(shop.app, shop.base);
    const config = shop.app.services.config as { SVC_SETTLE_WAIT_MS: number };
    const realWait = config.SVC_SETTLE_WAIT_MS;
    await chain.setAutomine(false);
    config.SVC_SETTLE_WAIT_MS = 300;
    let res;
    try {
      res = await settle(shop.app, shop.base, s.id, await signPayment(buyer, s.pr));
    } finally {
      config.SVC_SETTLE_WAIT_MS = realWait;
    }
    expect(res.status, res.text).toBe(202);
    // our transfer is mined as a call to an address with no code: it moves nothing
    await chain.installToken('none');
    await chain.mine();
    await chain.setAutomine(true);

    const worker = startSettlementWorker(shop.app.services, { intervalMs: 3_600_000 });
    await worker.stop();
    const realNow = shop.app.services.now;
    const retried = () => shop.lines.filter((l) => l.msg === 'reconcile failed; will retry') as (Line & { err: string })[];
    const lease = async () => String((await sql<{ lease: string }>(shop.app, "select to_char(lease_until, 'YYYY-MM-DD HH24:MI:SS.US') as lease from settlement_attempts where session_id = ?", [s.id]))[0]!.lease);
    try {
      // the application clock an hour behind: a failed pass's re-check (its clock + 1 s) is due at once
      shop.app.services.now = () => new Date(Date.now() - 3_600_000);
      // the first failing pass, once the settle's own lease has run out
      while (retried().length === 0) {
        await worker.runOnce();
        if (retried().length === 0) await new Promise((r) => setTimeout(r, 100));
      }
      // ten more passes, each of which reconciled the attempt and failed (each wrote a new re-check time)
      const leases = new Set<string>([await lease()]);
      for (let i = 0; i < 10; i++) {
        await worker.runOnce();
        leases.add(await lease());
      }
      expect(leases.size).toBe(11);
      expect(await sql(shop.app, 'select status from settlement_attempts where session_id = ?', [s.id])).toEqual([{ status: 'pending' }]);
      expect(retried()).toHaveLength(1);
      expect(retried()[0]!.err).toMatch(/returned no data/);
      expect(shop.lines.filter((l) => /unreachable/i.test(JSON.stringify(l)))).toEqual([]);

      await chain.installToken('usdc');
      await worker.runOnce();
    } finally {
      shop.app.services.now = realNow;
    }
    const view = await poll(shop.app, shop.base, s.id);
    expect(view.body).toMatchObject({ state: 'awaiting_payment', orderId: null, paymentError: { reasonCodes: ['CAPTURE_FAILED'] } });
    expect(await chain.usdcBalance(buyer.address)).toBe(10_000_000n);
  });
});

describe('live mode on a node of another chain (onchain facilitator)', () => {
  let chain: Anvil;
  let shop: Awaited<ReturnType<typeof liveShop>>;

  beforeAll(async () => {
    // Base Sepolia's chain id, with a token at the mainnet USDC address: only the id tells
    chain = await startAnvil({ chainId: 84532 });
    shop = await liveShop(chain);
  }, 120_000);
  afterAll(async () => {
    await shop?.app.stop();
    await chain?.stop();
  });

  it('GIVEN SVC_RPC_URL_BASE pointing at a node of chain 84532 WHEN /readyz is read and an agent settles THEN live.ok is false naming the chain id, and the settle answers 503 with nothing sent', async () => {
    const ready = await shop.app.request('GET', '/readyz');
    expect(ready.body.live).toMatchObject({ facilitator: 'onchain', ok: false, detail: { rpc: { ok: false, chainId: 84532 } } });
    expect(ready.body.live.detail.cause).toBe('The chain node serves chain id 84532, not base (8453): SVC_RPC_URL_BASE points at another network.');
    const before = await chainState(chain, shop.relayer);
    const s = await openLive(shop.app, shop.base);
    const res = await settle(shop.app, shop.base, s.id, await signPayment(privateKeyToAccount(generatePrivateKey()), s.pr));
    expectError(res, 503, 'FACILITATOR_UNAVAILABLE');
    expect(res.body.error_human).toContain('serves chain id 84532, not base (8453)');
    expect(await chainState(chain, shop.relayer)).toEqual(before);
  });
});
