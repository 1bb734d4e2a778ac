import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mapX402Reason, RemoteFacilitator, toX402 } from '../src/rails/remote.js';
import { startAnvil, type Anvil } from './helpers/anvil.js';
import { startX402Facilitator, X402_FACILITATOR_TOKEN as TOKEN, type Knobs } from './helpers/x402-facilitator.js';
import { nowSec, recorder, signedProof, silentLog } from './helpers/payments.js';

const USDC = 1_000_000n;

describe('RemoteFacilitator against a stock x402 facilitator on anvil', () => {
  let anvil: Anvil;
  let server: Server;
  let url: string;
  let remote: RemoteFacilitator;
  const knobs: Knobs = { settleDelayMs: 0, seenAuth: [], calls: [] };

  beforeAll(async () => {
    anvil = await startAnvil();
    ({ url, server } = await startX402Facilitator(anvil, knobs));
    remote = new RemoteFacilitator({ url, authHeader: { name: 'Authorization', value: `Bearer ${TOKEN}` }, rpcUrl: anvil.rpcUrl, log: silentLog() });
  });
  afterAll(async () => {
    await remote?.close();
    server?.close();
    await anvil?.stop();
  });

  const funded = async (amount: bigint) => {
    const payer = privateKeyToAccount(generatePrivateKey());
    if (amount > 0n) await anvil.mintUsdc(payer.address, amount);
    return payer;
  };
  const payTo = () => privateKeyToAccount(generatePrivateKey()).address;

  it('verify then settle: funds move by exactly value, the hash is recorded, the auth header is sent', async () => {
    const payer = await funded(5n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, 1_250_000n);
    expect(await remote.verify(proof, nowSec())).toMatchObject({ ok: true });
    const rec = recorder();
    const out = await remote.settle(proof, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: rec.recordBroadcast });
    expect(out).toMatchObject({ status: 'settled', reference: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
    expect(rec.records).toEqual([{ txHash: (out as { reference: string }).reference, rawTx: null, relayer: null, relayerNonce: null }]);
    expect(await anvil.usdcBalance(merchant)).toBe(1_250_000n);
    expect(await anvil.usdcBalance(payer.address)).toBe(3_750_000n);
    expect(knobs.seenAuth.every((a) => a === `Bearer ${TOKEN}`)).toBe(true);
    expect(await remote.reconcile({ proof, broadcasts: rec.records, nowSec: nowSec() })).toEqual(out);
  });

  it("the facilitator's refusals map to our codes and move no funds", async () => {
    const payer = await funded(5n * USDC);
    const merchant = payTo();
    const used = await signedProof(payer, merchant, USDC);
    const first = await remote.settle(used, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: recorder().recordBroadcast });
    expect(first.status).toBe('settled');
    // The same authorization again: executed as signed, it answers the transaction that carried it
    // (the service's replay reservation is what refuses it to a second session).
    expect(await remote.verify(used, nowSec())).toMatchObject({ ok: true });
    expect(await remote.settle(used, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: recorder().recordBroadcast })).toEqual(first);
    const spentElsewhere = await signedProof(payer, merchant, 2n * USDC, { nonce: used.authorization.nonce });

    const unfunded = await signedProof(await funded(0n), merchant, USDC);
    // our clock says valid, the facilitator's (and the chain's) says expired
    const expired = await signedProof(payer, merchant, USDC, { validBefore: nowSec() - 2 });
    for (const [label, proof, now, code] of [
      ['nonce spent on another authorization', spentElsewhere, nowSec(), 'NONCE_ALREADY_USED'],
      ['unfunded buyer', unfunded, nowSec(), 'INSUFFICIENT_FUNDS'],
      ['expired', expired, nowSec() - 100, 'PAYMENT_EXPIRED'],
    ] as const) {
      const rec = recorder();
      expect(await remote.verify(proof, now), label).toMatchObject({ ok: false, code });
      expect(await remote.settle(proof, { nowSec: now, waitMs: 15_000, recordBroadcast: rec.recordBroadcast }), label).toMatchObject({ status: 'failed', code });
      expect(rec.records, label).toEqual([]);
    }
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
  });

  it('/settle answered too late is pending with no reference; reconcile finds the transaction on chain', async () => {
    const payer = await funded(5n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    knobs.settleDelayMs = 1500;
    const settleCalls = () => knobs.calls.filter((c) => c === 'POST /settle').length;
    const before = settleCalls();
    try {
      const rec = recorder();
      const out = await remote.settle(proof, { nowSec: nowSec(), waitMs: 500, recordBroadcast: rec.recordBroadcast });
      expect(out).toEqual({ status: 'pending', reference: null });
      expect(settleCalls() - before).toBe(1);
      // The facilitator's transfer lands on chain while it delays its answer; reconcile until it is seen there.
      let rc = await remote.reconcile({ proof, broadcasts: [], nowSec: nowSec() });
      for (const end = Date.now() + 60_000; rc.status === 'pending' && Date.now() < end; ) {
        await new Promise((r) => setTimeout(r, 250));
        rc = await remote.reconcile({ proof, broadcasts: [], nowSec: nowSec() });
      }
      expect(rc).toMatchObject({ status: 'settled', reference: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
      expect(await anvil.usdcBalance(merchant)).toBe(USDC);
    } finally {
      knobs.settleDelayMs = 0;
    }
  });

  it('reconcile without anything known: pending while valid, failed once validBefore has passed on chain', async () => {
    const payer = await funded(USDC);
    const live = await signedProof(payer, payTo(), USDC);
    expect(await remote.reconcile({ proof: live, broadcasts: [], nowSec: nowSec() })).toEqual({ status: 'pending', reference: null });
    const gone = await signedProof(payer, payTo(), USDC, { validBefore: nowSec() - 1 });
    expect(await remote.reconcile({ proof: gone, broadcasts: [], nowSec: nowSec() })).toMatchObject({ status: 'failed', code: 'PAYMENT_EXPIRED' });
  });

  it('the payer canceled the authorization and the recorded transaction reverted: reconcile fails NONCE_ALREADY_USED, never settled, nothing moved', async () => {
    const payer = await funded(USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const cancel = await anvil.cancelAuthorization(payer, proof.authorization.nonce as Hex);
    expect((await anvil.client.waitForTransactionReceipt({ hash: cancel, pollingInterval: 50 })).status).toBe('success');
    // the facilitator's transfer, sent after the cancel (no simulation: a fixed gas limit), reverts
    const reverted = await anvil.sendAuthorization(proof, { gas: 200_000n });
    expect((await anvil.client.waitForTransactionReceipt({ hash: reverted, pollingInterval: 50 })).status).toBe('reverted');
    const broadcasts = [{ txHash: reverted, rawTx: null, relayer: null, relayerNonce: null }];
    expect(await remote.reconcile({ proof, broadcasts, nowSec: nowSec() })).toEqual({
      status: 'failed',
      code: 'NONCE_ALREADY_USED',
      human: expect.stringContaining(`cancelAuthorization, transaction ${cancel}`),
    });
    expect(await anvil.usdcBalance(merchant)).toBe(0n);
    expect(await anvil.usdcBalance(payer.address)).toBe(USDC);
  });

  it('someone else carried the authorization on chain before us: verify is ok (our node judges the used nonce) and the settle is settled with their transaction, with no /settle call', async () => {
    const payer = await funded(5n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const theirs = await anvil.sendAuthorization(proof);
    expect((await anvil.client.waitForTransactionReceipt({ hash: theirs, pollingInterval: 50 })).status).toBe('success');
    const settleCalls = () => knobs.calls.filter((c) => c === 'POST /settle').length;
    const before = settleCalls();
    expect(await remote.verify(proof, nowSec())).toMatchObject({ ok: true });
    const rec = recorder();
    expect(await remote.settle(proof, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: rec.recordBroadcast })).toEqual({ status: 'settled', reference: theirs });
    expect(settleCalls() - before).toBe(0);
    expect(rec.records).toEqual([]);
    expect(await remote.reconcile({ proof, broadcasts: [], nowSec: nowSec() })).toEqual({ status: 'settled', reference: theirs });
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);

    // without a verify just before (another process, a later approval), the refused /settle is judged on chain too
    const fresh = new RemoteFacilitator({ url, authHeader: { name: 'Authorization', value: `Bearer ${TOKEN}` }, rpcUrl: anvil.rpcUrl, log: silentLog() });
    expect(await fresh.settle(proof, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: recorder().recordBroadcast })).toEqual({ status: 'settled', reference: theirs });
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
  });

  it('the nonce spent on chain by another authorization of the payer (to another address): verify and settle refuse NONCE_ALREADY_USED naming that transaction', async () => {
    const payer = await funded(5n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const spent = await anvil.sendAuthorization(await signedProof(payer, payTo(), USDC, { nonce: proof.authorization.nonce }));
    expect((await anvil.client.waitForTransactionReceipt({ hash: spent, pollingInterval: 50 })).status).toBe('success');
    const refused = { code: 'NONCE_ALREADY_USED', human: expect.stringContaining(spent) };
    expect(await remote.verify(proof, nowSec())).toEqual({ ok: false, ...refused });
    expect(await remote.settle(proof, { nowSec: nowSec(), waitMs: 15_000, recordBroadcast: recorder().recordBroadcast })).toEqual({ status: 'failed', ...refused });
    expect(await anvil.usdcBalance(merchant)).toBe(0n);
  });

  it('health checks /supported and the RPC; an unreachable facilitator is 503 on verify and settle, and no credentials leak', async () => {
    const h = await remote.health();
    expect(h).toMatchObject({ ok: true, detail: { facilitator: 'remote', supported: true, rpc: { ok: true, chainId: 8453 } } });
    expect(JSON.stringify(h)).not.toContain(TOKEN);
    const noAuth = new RemoteFacilitator({ url, rpcUrl: anvil.rpcUrl, log: silentLog() });
    expect(await noAuth.health()).toMatchObject({ ok: false, detail: { supported: false, cause: expect.stringContaining('refused GET /supported (401)') } });
    const unpaid = await signedProof(await funded(USDC), payTo(), USDC);
    await expect(noAuth.settle(unpaid, { nowSec: nowSec(), waitMs: 5000, recordBroadcast: recorder().recordBroadcast })).rejects.toMatchObject({
      codes: ['FACILITATOR_UNAVAILABLE'],
    });
    await expect(noAuth.verify(unpaid, nowSec())).rejects.toMatchObject({ codes: ['FACILITATOR_UNAVAILABLE'] });

    const closed = createServer();
    await new Promise<void>((r) => closed.listen(0, '127.0.0.1', r));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const down = new RemoteFacilitator({ url: `http://127.0.0.1:${port}`, rpcUrl: anvil.rpcUrl, log: silentLog(), options: { requestTimeoutMs: 1000 } });
    const proof = await signedProof(await funded(USDC), payTo(), USDC);
    await expect(down.verify(proof, nowSec())).rejects.toMatchObject({ codes: ['FACILITATOR_UNAVAILABLE'], status: 503 });
    await expect(down.settle(proof, { nowSec: nowSec(), waitMs: 1000, recordBroadcast: recorder().recordBroadcast })).rejects.toMatchObject({
      codes: ['FACILITATOR_UNAVAILABLE'],
    });
  });

  it('our chain node serves no token at the USDC address (a wrong SVC_RPC_URL_BASE): health names the cause, verify and settle answer 503 naming it before any request reaches the facilitator', async () => {
    const empty = await startAnvil({ token: 'none' });
    try {
      const wrongRpc = new RemoteFacilitator({ url, authHeader: { name: 'Authorization', value: `Bearer ${TOKEN}` }, rpcUrl: empty.rpcUrl, log: silentLog() });
      const h = await wrongRpc.health();
      expect(h).toMatchObject({ ok: false, detail: { facilitator: 'remote', supported: true, rpc: { ok: true, chainId: 8453 }, token: { code: false } } });
      expect(h.detail.cause).toMatch(/^No contract at the USDC address/);
      const calls = knobs.calls.length;
      const proof = await signedProof(await funded(USDC), payTo(), USDC);
      const unavailable = { codes: ['FACILITATOR_UNAVAILABLE'], status: 503, human: expect.stringContaining('No contract at the USDC address') };
      await expect(wrongRpc.verify(proof, nowSec())).rejects.toMatchObject(unavailable);
      await expect(wrongRpc.settle(proof, { nowSec: nowSec(), waitMs: 5000, recordBroadcast: recorder().recordBroadcast })).rejects.toMatchObject(unavailable);
      // only the readiness check's GET /supported went out, never /verify or /settle
      expect(knobs.calls.slice(calls).filter((c) => c !== 'GET /supported')).toEqual([]);
    } finally {
      await empty.stop();
    }
  });

  it('maps x402 reason strings and builds the v2 payload and requirements', async () => {
    expect(mapX402Reason('invalid_exact_evm_signature').code).toBe('SIGNER_MISMATCH');
    expect(mapX402Reason('invalid_exact_evm_payload_signature').code).toBe('SIGNER_MISMATCH');
    expect(mapX402Reason('invalid_exact_evm_nonce_already_used').code).toBe('NONCE_ALREADY_USED');
    expect(mapX402Reason('insufficient_funds').code).toBe('INSUFFICIENT_FUNDS');
    expect(mapX402Reason('invalid_exact_evm_insufficient_balance').code).toBe('INSUFFICIENT_FUNDS');
    expect(mapX402Reason('invalid_exact_evm_payload_authorization_valid_before').code).toBe('PAYMENT_EXPIRED');
    expect(mapX402Reason('invalid_exact_evm_payload_authorization_valid_after').code).toBe('PAYMENT_NOT_YET_VALID');
    expect(mapX402Reason('invalid_exact_evm_recipient_mismatch').code).toBe('PAYMENT_RECIPIENT_MISMATCH');
    expect(mapX402Reason('invalid_exact_evm_network_mismatch').code).toBe('PAYMENT_SCHEME_UNSUPPORTED');
    expect(mapX402Reason('http://secret@x <script>')).toMatchObject({ code: 'CAPTURE_FAILED', human: expect.not.stringContaining('<') });
    const proof = await signedProof(privateKeyToAccount(generatePrivateKey()), payTo(), 42n);
    const { payload, requirements } = toX402(proof, 60);
    expect(requirements).toMatchObject({
      scheme: 'exact',
      network: 'eip155:8453',
      amount: '42',
      asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      extra: { name: 'USD Coin', version: '2' },
    });
    expect(payload).toMatchObject({ x402Version: 2, payload: { authorization: { value: '42', validAfter: String(proof.authorization.validAfter) }, signature: proof.signature } });
  });
});
