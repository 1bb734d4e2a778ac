import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Address } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { EIP3009_TOKEN_ABI } from '../src/dev-chain/eip3009-token.artifact.js';
import { USDC_BASE } from './helpers/anvil.js';
import { useLiveProcess } from './helpers/live-process.js';
import { signPayment } from './helpers/agent.js';

/**
 * kill -9 of a real server process (`tsx server/src/main.ts`, the same entry point as
 * `npm start`, run by node itself) while live settles are in flight on a chain that mines every second; after a
 * restart the reconciler must leave every transfer that moved with exactly one order, one
 * receipt and one order.settled, and every one that did not move released.
 */
const live = useLiveProcess('crash');
const { call, kill9 } = live;
const startServer = live.start;

describe('kill -9 during live settlement', () => {
  it('GIVEN live settles in flight WHEN the server is killed with SIGKILL and restarted THEN within 60 s every moved transfer has exactly one order, receipt and order.settled and every unmoved one is released', async () => {
    // The first live key, minted by the admin CLI before the server holds the database.
    const key = live.liveKey();

    await startServer();
    const payTo = privateKeyToAccount(generatePrivateKey()).address;
    const m = await call('POST', '/v1/merchants', { key, body: { slug: `crash-${randomUUID().slice(0, 8)}`, name: 'Crash', domain: 'crash.example.com', receiving: { x402: { chain: 'base', address: payTo } } } });
    expect(m.status, m.text).toBe(201);
    const q = `?merchant_id=${m.body.id}`;
    expect((await call('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '1.25', currency: 'USD' } } })).status).toBe(201);
    expect((await call('PUT', `/v1/policy${q}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } })).status).toBe(201);
    expect((await call('POST', `/v1/publish${q}`, { key })).status).toBe(200);
    const base = `/m/${m.body.id}`;

    const N = 10;
    const buyers = Array.from({ length: N }, () => privateKeyToAccount(generatePrivateKey()));
    for (const b of buyers) await live.chain.mintUsdc(b.address, 10_000_000n);
    const sessions: Array<{ id: string; from: Address; nonce: `0x${string}` }> = [];
    const payments: unknown[] = [];
    for (const b of buyers) {
      const s = await call('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'tea', qty: 1 }] } });
      expect(s.status, s.text).toBe(201);
      const p = await signPayment(b, s.body.payment_required);
      sessions.push({ id: s.body.session_id, from: b.address, nonce: p.payment.authorization.nonce });
      payments.push(p);
    }
    // Fire every settle, then kill the server while they wait for blocks (2 s block time).
    const inFlight = sessions.map((s, i) => call('POST', `${base}/agent/checkout/${s.id}/settle`, { body: payments[i] }).catch(() => null));
    // Kill as soon as transfers sit in the node's mempool (sent, not yet mined: blocks come every 2 s).
    const seen = Date.now() + 30_000;
    for (;;) {
      const pool = await live.chain.rpc<{ pending: string }>('txpool_status');
      if (Number(pool.pending) >= 1 || Date.now() > seen) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await kill9();
    await Promise.all(inFlight);

    const t0 = Date.now();
    await startServer();
    process.stderr.write(`restart took ${Date.now() - t0} ms\n`);
    const deadline = Date.now() + 60_000;
    const states = new Map<string, string>();
    for (;;) {
      for (const s of sessions) states.set(s.id, (await call('GET', `${base}/agent/checkout/${s.id}`)).body.state);
      if (![...states.values()].includes('settling') || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    process.stderr.write(`resolved ${Date.now() - t0} ms after the restart began: ${JSON.stringify([...states.values()])}\n`);
    expect([...states.values()].filter((st) => st === 'settling')).toEqual([]);

    const orders = (await call('GET', `/v1/orders${q}&limit=100`, { key })).body.data as Array<{ session_id: string; decision: string; settlement_ref?: string; receipt_id?: string }>;
    const events = (await call('GET', '/v1/events?limit=100', { key })).body.data as Array<{ type: string; data: { object: { session_id: string } } }>;
    let moved = 0;
    for (const s of sessions) {
      const used = await live.chain.client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'authorizationState', args: [s.from, s.nonce] });
      const mine = orders.filter((o) => o.session_id === s.id);
      const settled = events.filter((e) => e.type === 'order.settled' && e.data.object.session_id === s.id);
      if (used) {
        moved += 1;
        expect(states.get(s.id)).toBe('accepted');
        expect(mine).toHaveLength(1);
        expect(mine[0]).toMatchObject({ decision: 'accept' });
        expect(mine[0]!.receipt_id).toMatch(/^rcpt_/);
        expect((await live.chain.client.getTransactionReceipt({ hash: mine[0]!.settlement_ref as `0x${string}` })).status).toBe('success');
        expect(settled).toHaveLength(1);
      } else {
        expect(states.get(s.id)).toBe('awaiting_payment');
        expect(mine).toHaveLength(0);
        expect(settled).toHaveLength(0);
      }
    }
    expect(await live.chain.usdcBalance(payTo)).toBe(BigInt(moved) * 1_250_000n);
    expect(moved).toBeGreaterThan(0);
  }, 240_000);
});
