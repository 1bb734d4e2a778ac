import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Address, Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { EIP3009_TOKEN_ABI } from '../src/dev-chain/eip3009-token.artifact.js';
import { USDC_BASE } from './helpers/anvil.js';
import { useLiveProcess } from './helpers/live-process.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '@svc/contract';
import { signPayment } from './helpers/agent.js';

/**
 * kill -9 of a real server process (`tsx server/src/main.ts`) while live refunds are being
 * broadcast on a chain that mines every 2 s (issue 26): after a restart the settlement worker
 * must leave every refund transfer that moved with exactly one succeeded refund, one
 * refund.succeeded and the order's amount_refunded counting it, and every one that did not move
 * failed with no money moved.
 */
const live = useLiveProcess('rcrash');
const { call, kill9 } = live;
const startServer = live.start;

describe('kill -9 during live refunds', () => {
  it('GIVEN refund transfers in flight WHEN the server is killed with SIGKILL and restarted THEN every moved transfer has exactly one succeeded refund and event, and every unmoved one moved nothing', async () => {
    // The first live key, minted by the admin CLI before the server holds the database.
    const key = live.liveKey();

    await startServer();
    const wallet = privateKeyToAccount(generatePrivateKey());
    const m = await call('POST', '/v1/merchants', { key, body: { slug: `rcrash-${randomUUID().slice(0, 8)}`, name: 'Crash', domain: 'rcrash.example.com', receiving: { x402: { chain: 'base', address: wallet.address } } } });
    expect(m.status, m.text).toBe(201);
    const q = `?merchant_id=${m.body.id}`;
    expect((await call('POST', `/v1/catalog${q}`, { key, body: { sku: 'tea', name: 'Tea', price: { amount: '1.25', currency: 'USD' } } })).status).toBe(201);
    expect((await call('PUT', `/v1/policy${q}`, { key, body: { body: { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null } } })).status).toBe(201);
    expect((await call('POST', `/v1/publish${q}`, { key })).status).toBe(200);
    const base = `/m/${m.body.id}`;

    // N orders paid on chain, settled concurrently (one block for all).
    const N = 8;
    const buyers = Array.from({ length: N }, () => privateKeyToAccount(generatePrivateKey()));
    for (const b of buyers) await live.chain.mintUsdc(b.address, 10_000_000n);
    const orderIds = await Promise.all(
      buyers.map(async (b) => {
        const s = await call('POST', `${base}/agent/checkout`, { body: { agent_id: randomUUID(), items: [{ sku: 'tea', qty: 1 }] } });
        expect(s.status, s.text).toBe(201);
        const paid = await call('POST', `${base}/agent/checkout/${s.body.session_id}/settle`, { body: await signPayment(b, s.body.payment_required) });
        expect(paid.status, paid.text).toBe(200);
        return paid.body.order_id as string;
      }),
    );
    expect(await live.chain.usdcBalance(wallet.address)).toBe(BigInt(N) * 1_250_000n);

    // A full refund of each, signed by the merchant's receiving key.
    const refunds: Array<{ id: string; orderId: string; buyer: Address; nonce: Hex; signature: Hex }> = [];
    for (const [i, orderId] of orderIds.entries()) {
      const r = await call('POST', '/v1/refunds', { key, body: { order_id: orderId } });
      expect(r.status, r.text).toBe(201);
      const td = r.body.authorization_request.typed_data;
      const signature = await wallet.signTypedData({
        domain: { ...td.domain, verifyingContract: td.domain.verifyingContract as Hex },
        types: TRANSFER_WITH_AUTHORIZATION_TYPES,
        primaryType: 'TransferWithAuthorization',
        message: { from: td.message.from, to: td.message.to, value: BigInt(td.message.value), validAfter: BigInt(td.message.validAfter), validBefore: BigInt(td.message.validBefore), nonce: td.message.nonce },
      });
      refunds.push({ id: r.body.id, orderId, buyer: buyers[i]!.address, nonce: td.message.nonce, signature });
    }

    // Fire every authorization, then kill the server as soon as a transfer sits in the mempool.
    const inFlight = refunds.map((r) => call('POST', `/v1/refunds/${r.id}/authorize`, { key, body: { signature: r.signature } }).catch(() => null));
    const seen = Date.now() + 30_000;
    for (;;) {
      const pool = await live.chain.rpc<{ pending: string }>('txpool_status');
      if (Number(pool.pending) >= 1 || Date.now() > seen) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    await kill9();
    // The kill cut authorizations mid-flight: the restarted worker finishes them from the live.chain.
    const unanswered = (await Promise.all(inFlight)).filter((a) => a === null || a.status !== 200).length;
    expect(unanswered).toBeGreaterThan(0);

    await startServer();
    const deadline = Date.now() + 90_000;
    const states = new Map<string, string>();
    for (;;) {
      for (const r of refunds) states.set(r.id, (await call('GET', `/v1/refunds/${r.id}`, { key })).body.status);
      if (![...states.values()].includes('pending') || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 300));
    }
    process.stderr.write(`${unanswered} of ${N} authorizations cut by the kill; refund states after the restart: ${JSON.stringify([...states.values()])}\n`);
    expect([...states.values()].filter((s) => s === 'pending')).toEqual([]);

    const orders = (await call('GET', `/v1/orders${q}&limit=100`, { key })).body.data as Array<{ id: string; amount_refunded: string; refund_status: string }>;
    const events = (await call('GET', '/v1/events?limit=100', { key })).body.data as Array<{ type: string; data: { object: { id: string } } }>;
    let moved = 0;
    for (const r of refunds) {
      const used = await live.chain.client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'authorizationState', args: [wallet.address, r.nonce] });
      const succeeded = events.filter((e) => e.type === 'refund.succeeded' && e.data.object.id === r.id);
      const order = orders.find((o) => o.id === r.orderId)!;
      const refund = (await call('GET', `/v1/refunds/${r.id}`, { key })).body;
      if (used) {
        moved += 1;
        expect(refund.status).toBe('succeeded');
        expect((await live.chain.client.getTransactionReceipt({ hash: refund.transaction })).status).toBe('success');
        expect(succeeded).toHaveLength(1);
        expect(order).toMatchObject({ amount_refunded: '1.25', refund_status: 'full' });
        expect(await live.chain.usdcBalance(r.buyer)).toBe(10_000_000n);
      } else {
        // A refund that did not move is failed or, if nothing was sent before the kill, authorizable again.
        expect(['failed', 'requires_authorization']).toContain(refund.status);
        expect(succeeded).toHaveLength(0);
        expect(order).toMatchObject({ amount_refunded: '0.00', refund_status: 'none' });
        expect(await live.chain.usdcBalance(r.buyer)).toBe(10_000_000n - 1_250_000n);
      }
    }
    expect(await live.chain.usdcBalance(wallet.address)).toBe(BigInt(N - moved) * 1_250_000n);
    expect(moved).toBeGreaterThan(0);
  }, 300_000);
});
