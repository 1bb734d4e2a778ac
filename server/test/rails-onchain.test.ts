import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { createWalletClient, http, parseSignature, parseTransaction, type Hex } from 'viem';
import { base } from 'viem/chains';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BroadcastRecord } from '../src/rails/types.js';
import pino from 'pino';
import { OnchainFacilitator, transferCalldata, type OnchainFacilitatorOptions } from '../src/rails/onchain/facilitator.js';
import { EIP3009_TOKEN_ABI, MULTICALL3_ABI } from '../src/dev-chain/eip3009-token.artifact.js';
import { ANVIL_DEV_KEY, countingRpcProxy, MULTICALL3_ADDRESS, startAnvil, USDC_BASE, type Anvil } from './helpers/anvil.js';
import { brokenChecksum, highS, nowSec, parityV, recorder, signedProof, silentLog } from './helpers/payments.js';

const ETH = 10n ** 18n;
const USDC = 1_000_000n;
/**
 * The bound given to a settle that should be mined: far above what anvil needs, so a busy
 * machine never turns a mined transfer into `pending`. A settle answers as soon as its
 * transfer is mined; the bound only ends a wait that failed.
 */
const WAIT_MS = 45_000;

function facilitatorOn(anvil: Anvil, keys: Hex[], options: OnchainFacilitatorOptions = {}) {
  return new OnchainFacilitator({ rpcUrl: anvil.rpcUrl, privateKeys: keys, chain: 'base', log: silentLog(), options: { pollMs: 100, ...options } });
}

async function fundedRelayers(anvil: Anvil, n: number): Promise<Hex[]> {
  const keys = Array.from({ length: n }, () => generatePrivateKey());
  for (const k of keys) await anvil.setEthBalance(privateKeyToAccount(k).address, 100n * ETH);
  return keys;
}

async function fundedPayer(anvil: Anvil, amount: bigint) {
  const payer = privateKeyToAccount(generatePrivateKey());
  if (amount > 0n) await anvil.mintUsdc(payer.address, amount);
  return payer;
}

const payTo = () => privateKeyToAccount(generatePrivateKey()).address;

/** 16 authorizations from one payer settled at once through these relayers (timing printed, not asserted). */
async function settleSixteen(anvil: Anvil, relayerKeys: Hex[], label: string) {
  const fac = facilitatorOn(anvil, relayerKeys);
  const payer = await fundedPayer(anvil, 100n * USDC);
  const merchant = payTo();
  const proofs = await Promise.all(Array.from({ length: 16 }, () => signedProof(payer, merchant, USDC)));
  const rec = recorder();
  const t0 = performance.now();
  const outs = await Promise.all(proofs.map((p) => fac.settle(p, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast })));
  console.log(`${label}: 16 concurrent settles through ${relayerKeys.length} relayer(s): ${Math.round(performance.now() - t0)} ms`);
  return { fac, merchant, outs, rec };
}

describe('OnchainFacilitator on anvil (automine)', () => {
  let anvil: Anvil;
  let keys: Hex[];
  let f: OnchainFacilitator;

  beforeAll(async () => {
    anvil = await startAnvil();
    keys = await fundedRelayers(anvil, 4);
    f = facilitatorOn(anvil, keys.slice(0, 1));
  });
  afterAll(async () => {
    await f?.close();
    await anvil?.stop();
  });

  it('a valid transfer settles, moves exactly value, and is recorded before it is sent', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, 1_500_000n);
    const seenBeforeSend: unknown[] = [];
    const rec = recorder(async (r) => {
      seenBeforeSend.push(await anvil.rpc('eth_getTransactionByHash', [r.txHash]));
    });
    const out = await f.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
    expect(out).toEqual({ status: 'settled', reference: rec.records[0]!.txHash });
    expect(rec.records).toHaveLength(1);
    expect(rec.records[0]).toMatchObject({ relayer: f.relayerAddresses[0], relayerNonce: expect.any(Number), rawTx: expect.stringMatching(/^0x02/) });
    expect(seenBeforeSend).toEqual([null]);
    expect(await anvil.usdcBalance(payer.address)).toBe(8_500_000n);
    expect(await anvil.usdcBalance(merchant)).toBe(1_500_000n);
    const receipt = await anvil.client.getTransactionReceipt({ hash: rec.records[0]!.txHash });
    expect(receipt.status).toBe('success');
  });

  it('refusals are mapped precisely, nothing is recorded and no funds move', async () => {
    const payer = await fundedPayer(anvil, 5n * USDC);
    const merchant = payTo();
    const used = await signedProof(payer, merchant, USDC);
    const first = await f.settle(used, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast });
    expect(first.status).toBe('settled');

    // The same authorization again: executed as signed, it answers the transaction that carried
    // it and sends nothing (settle is idempotent on the authorization; the service's replay
    // reservation is what refuses it to a second session).
    expect(await f.verify(used, nowSec())).toMatchObject({ ok: true });
    const replay = recorder();
    expect(await f.settle(used, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: replay.recordBroadcast })).toEqual(first);
    expect(replay.records).toEqual([]);

    const cases: [string, Awaited<ReturnType<typeof signedProof>>, number, string][] = [
      ['nonce spent on another authorization', await signedProof(payer, merchant, 2n * USDC, { nonce: used.authorization.nonce }), nowSec(), 'NONCE_ALREADY_USED'],
      ['unfunded buyer', await signedProof(await fundedPayer(anvil, 0n), merchant, USDC), nowSec(), 'INSUFFICIENT_FUNDS'],
      ['expired (off chain)', await signedProof(payer, merchant, USDC, { validBefore: nowSec() + 3 }), nowSec(), 'PAYMENT_EXPIRED'],
      // the service clock says valid, the chain says expired: the simulation's revert is mapped
      ['expired (on chain)', await signedProof(payer, merchant, USDC, { validBefore: nowSec() - 2 }), nowSec() - 100, 'PAYMENT_EXPIRED'],
      ['wrong domain name', await signedProof(payer, merchant, USDC, { domainName: 'USDC' }), nowSec(), 'SIGNER_MISMATCH'],
    ];
    for (const [label, proof, now, code] of cases) {
      const rec = recorder();
      expect(await f.verify(proof, now), label).toMatchObject({ ok: false, code });
      expect(await f.settle(proof, { nowSec: now, waitMs: 5_000, recordBroadcast: rec.recordBroadcast }), label).toMatchObject({ status: 'failed', code });
      expect(rec.records, label).toEqual([]);
    }
    expect(await anvil.usdcBalance(payer.address)).toBe(4n * USDC);
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
  });

  it('verify is one chain read (a simulation capped at the standard gas limit) and the settle right after it reuses it', async () => {
    const rpc = await countingRpcProxy(anvil.rpcUrl);
    const fac = new OnchainFacilitator({ rpcUrl: rpc.url, privateKeys: keys.slice(1, 2), chain: 'base', log: silentLog(), options: { pollMs: 100 } });
    try {
      const payer = await fundedPayer(anvil, 10n * USDC);
      const verified = await signedProof(payer, payTo(), USDC);
      // warm the relayer's nonce counter and the fee estimate, so the counts below are per settle
      expect((await fac.settle(await signedProof(payer, payTo(), USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).status).toBe('settled');

      rpc.reset();
      expect(await fac.verify(verified, nowSec())).toMatchObject({ ok: true });
      expect(Object.fromEntries(rpc.counts)).toEqual({ eth_call: 1 });

      rpc.reset();
      expect(await fac.settle(verified, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).toMatchObject({ status: 'settled' });
      expect(rpc.counts.get('eth_call') ?? 0).toBe(0);
      expect(rpc.counts.get('eth_estimateGas') ?? 0).toBe(0);
      expect(rpc.counts.get('eth_sendRawTransaction')).toBe(1);

      // without a verify just before, the settle simulates on its own
      rpc.reset();
      expect(await fac.settle(await signedProof(payer, payTo(), USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).toMatchObject({ status: 'settled' });
      expect(rpc.counts.get('eth_call')).toBe(1);
      expect(rpc.counts.get('eth_estimateGas') ?? 0).toBe(0);

      // a short balance is refused by that one simulation, and the refusal says what the payer holds
      const poor = await fundedPayer(anvil, USDC / 2n);
      const refused = await fac.verify(await signedProof(poor, payTo(), USDC), nowSec());
      expect(refused).toMatchObject({ ok: false, code: 'INSUFFICIENT_FUNDS' });
      expect(refused.ok ? '' : refused.human).toContain(`holds ${USDC / 2n} base units`);
    } finally {
      await fac.close();
      await rpc.close();
    }
  });

  it('a transfer that needs more gas than the standard limit (a heavy signature check) is estimated and still settles; one within it is sent with the standard limit, signed as viem signs', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const rpc = await countingRpcProxy(anvil.rpcUrl);
    // a standard limit below what any transfer needs stands for a transfer heavier than the default one
    const tight = new OnchainFacilitator({ rpcUrl: rpc.url, privateKeys: keys.slice(3, 4), chain: 'base', log: silentLog(), options: { pollMs: 100, standardGas: 30_000n } });
    try {
      // the first verify also checks the chain (chain id, the token's code and domain)
      expect(await tight.verify(await signedProof(payer, payTo(), USDC), nowSec())).toMatchObject({ ok: true });
      rpc.reset();
      const proof = await signedProof(payer, payTo(), USDC);
      expect(await tight.verify(proof, nowSec())).toMatchObject({ ok: true });
      expect(Object.fromEntries(rpc.counts)).toEqual({ eth_call: 1, eth_estimateGas: 1 });
      const rec = recorder();
      const out = await tight.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
      expect(out).toEqual({ status: 'settled', reference: rec.records[0]!.txHash });
      const gas = parseTransaction(rec.records[0]!.rawTx as Hex).gas!;
      expect(gas).toBeGreaterThan(30_000n);
      expect(gas).toBeLessThan(150_000n);
    } finally {
      await tight.close();
      await rpc.close();
    }

    const rec = recorder();
    const out = await f.settle(await signedProof(payer, payTo(), USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
    expect(out).toEqual({ status: 'settled', reference: rec.records[0]!.txHash });
    const raw = rec.records[0]!.rawTx as Hex;
    const tx = parseTransaction(raw);
    expect(tx.gas).toBe(150_000n);
    // the relayer's signature (libsecp256k1 where it loads) is the one viem's account would make
    const unsigned = { chainId: tx.chainId!, nonce: tx.nonce!, to: tx.to!, data: tx.data!, gas: tx.gas!, value: tx.value ?? 0n, maxFeePerGas: tx.maxFeePerGas!, maxPriorityFeePerGas: tx.maxPriorityFeePerGas! };
    expect(await privateKeyToAccount(keys[0]!).signTransaction({ type: 'eip1559', ...unsigned })).toBe(raw);
  });

  it('a new broadcast is looked at right away, not a poll interval later', async () => {
    // With a ten-minute poll the interval never runs within the settle's bound: only the early
    // looks after the send can see the mined transfer, and each settle is settled, not pending.
    const rpc = await countingRpcProxy(anvil.rpcUrl);
    const fac = new OnchainFacilitator({ rpcUrl: rpc.url, privateKeys: keys.slice(2, 3), chain: 'base', log: silentLog(), options: { pollMs: 600_000 } });
    try {
      const payer = await fundedPayer(anvil, 10n * USDC);
      for (let i = 0; i < 3; i++) {
        const rec = recorder();
        const out = await fac.settle(await signedProof(payer, payTo(), USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
        expect(out).toEqual({ status: 'settled', reference: rec.records[0]!.txHash });
      }
      expect(rpc.counts.get('eth_getTransactionReceipt')).toBeGreaterThanOrEqual(3);
    } finally {
      await fac.close();
      await rpc.close();
    }
  });

  it('mock parity: v=0/1, high-s and a broken-checksum from are canonicalized, and the canonical form settles on chain', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const variants = [
      await signedProof(payer, merchant, USDC).then((p) => ({ ...p, signature: parityV(p.signature) })),
      await signedProof(payer, merchant, USDC).then((p) => ({ ...p, signature: highS(p.signature) })),
      await signedProof(payer, merchant, USDC).then((p) => ({ ...p, authorization: { ...p.authorization, from: brokenChecksum(p.authorization.from) } })),
      await signedProof(payer, merchant, USDC).then((p) => ({ ...p, authorization: { ...p.authorization, from: '0x' + p.authorization.from.slice(2).toUpperCase() } })),
    ];
    for (const p of variants) {
      const v = await f.verify(p, nowSec());
      expect(v.ok).toBe(true);
      if (!v.ok) continue;
      const sig = parseSignature(v.proof.signature);
      expect([27n, 28n]).toContain(sig.v);
      expect(BigInt(sig.s)).toBeLessThanOrEqual(0x7fffffffffffffffffffffffffffffff5d576e7357a4501ddfe92f46681b20a0n);
      expect(v.proof.authorization.from).toBe(payer.address);
      expect(await f.settle(p, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).toMatchObject({ status: 'settled' });
    }
    // the token itself refuses the non-canonical forms, so only canonicalization makes these settle
    const raw = await signedProof(payer, merchant, USDC);
    const dev = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), chain: base, transport: http(anvil.rpcUrl) });
    const a = raw.authorization;
    const args = [a.from as Hex, a.to as Hex, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as Hex] as const;
    await expect(
      anvil.client.simulateContract({ account: dev.account, address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'transferWithAuthorization', args: [...args, highS(raw.signature)] }),
    ).rejects.toThrow(/invalid signature 's' value/);
    await expect(
      anvil.client.simulateContract({ account: dev.account, address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'transferWithAuthorization', args: [...args, parityV(raw.signature)] }),
    ).rejects.toThrow(/invalid signature 'v' value/);
    expect(await anvil.usdcBalance(merchant)).toBe(4n * USDC);
  });

  for (const relayerCount of [1, 4]) {
    it(`16 concurrent settles through ${relayerCount} relayer(s) are all mined without nonce errors`, async () => {
      const { fac, merchant, outs, rec } = await settleSixteen(anvil, keys.slice(0, relayerCount), 'automine');
      expect(outs.map((o) => o.status)).toEqual(Array(16).fill('settled'));
      expect(rec.records).toHaveLength(16);
      const perRelayer = new Map<string, number[]>();
      for (const r of rec.records) perRelayer.set(r.relayer!, [...(perRelayer.get(r.relayer!) ?? []), r.relayerNonce!]);
      expect(perRelayer.size).toBe(relayerCount);
      for (const nonces of perRelayer.values()) expect(new Set(nonces).size).toBe(nonces.length);
      expect(await anvil.usdcBalance(merchant)).toBe(16n * USDC);
      await fac.close();
    });
  }

  it('reconcile: settled with the mined recorded hash; found through AuthorizationUsed when another tx carried it', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const rec = recorder();
    const out = await f.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
    expect(await f.reconcile({ proof, broadcasts: rec.records, nowSec: nowSec() })).toEqual(out);
    expect(out.status).toBe('settled');

    // someone else (not a recorded tx) used the authorization
    const other = await signedProof(payer, merchant, USDC);
    const hash = await anvil.sendAuthorization(other);
    await anvil.client.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    expect(await f.reconcile({ proof: other, broadcasts: [], nowSec: nowSec() })).toEqual({ status: 'settled', reference: hash });
  });

  // Two ways for the payer to spoil the nonce while our transfer is in the pool: cancel the
  // authorization, or spend its nonce on another authorization of theirs (to their own address).
  for (const spoiler of ['cancelAuthorization', 'a transfer of the same nonce to the payer'] as const) {
    it(`the payer spoils the nonce ahead of our transfer (${spoiler} mined first, ours reverts): failed NONCE_ALREADY_USED, never settled, and nothing moved`, async () => {
      const fac = facilitatorOn(anvil, keys.slice(2, 3));
      const payer = await fundedPayer(anvil, 10n * USDC);
      const merchant = payTo();
      const proof = await signedProof(payer, merchant, USDC);
      const nonce = proof.authorization.nonce as Hex;
      const spoil = async (): Promise<Hex> => {
        if (spoiler === 'cancelAuthorization') return anvil.cancelAuthorization(payer, nonce);
        const own = privateKeyToAccount(generatePrivateKey()).address;
        return anvil.sendAuthorization(await signedProof(payer, own, 1n, { nonce }), { gas: 200_000n, tipGwei: 100n });
      };
      await anvil.setAutomine(false);
      let spoiled: Hex | undefined;
      try {
        // the spoiler reaches the pool just before our transfer, with a far higher priority fee
        const rec = recorder(async (_r, n) => {
          if (n === 0) spoiled = await spoil();
        });
        const settling = fac.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
        while (!(rec.records[0] && (await anvil.rpc('eth_getTransactionByHash', [rec.records[0].txHash])))) await new Promise((r) => setTimeout(r, 20));
        await anvil.mine();
        const out = await settling;
        const ours = rec.records[0]!.txHash;
        const [spoilerReceipt, ourReceipt] = await Promise.all([spoiled!, ours].map((hash) => anvil.client.getTransactionReceipt({ hash })));
        expect([spoilerReceipt!.status, ourReceipt!.status]).toEqual(['success', 'reverted']);
        expect(spoilerReceipt!.blockNumber).toBe(ourReceipt!.blockNumber);
        expect(await anvil.client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'authorizationState', args: [payer.address, nonce] })).toBe(true);

        const failed = { status: 'failed', code: 'NONCE_ALREADY_USED', human: expect.stringContaining(`transaction ${spoiled}`) };
        expect(out).toEqual(failed);
        expect(await fac.reconcile({ proof, broadcasts: rec.records, nowSec: nowSec() })).toEqual(failed);
        expect(await anvil.usdcBalance(merchant)).toBe(0n);

        // used, but neither log in the window: undecided, never settled on a guess
        await anvil.mine();
        const blind = facilitatorOn(anvil, keys.slice(2, 3), { logLookbackBlocks: 0n });
        expect(await blind.reconcile({ proof, broadcasts: rec.records, nowSec: nowSec() })).toEqual({ status: 'pending', reference: ours });
        await blind.close();
      } finally {
        await anvil.setAutomine(true);
        await fac.close();
      }
    });
  }

  it('someone else carried the authorization on chain before us: verify is ok, the settle is settled with their transaction and sends nothing; a settle with no verify before it finds it too', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const theirs = await anvil.sendAuthorization(proof);
    expect((await anvil.client.waitForTransactionReceipt({ hash: theirs, pollingInterval: 50 })).status).toBe('success');
    expect(await f.verify(proof, nowSec())).toMatchObject({ ok: true });
    const rec = recorder();
    expect(await f.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast })).toEqual({ status: 'settled', reference: theirs });
    expect(rec.records).toEqual([]);
    const fresh = facilitatorOn(anvil, keys.slice(1, 2));
    const freshRec = recorder();
    expect(await fresh.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: freshRec.recordBroadcast })).toEqual({ status: 'settled', reference: theirs });
    expect(freshRec.records).toEqual([]);
    await fresh.close();
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
    expect(await anvil.usdcBalance(payer.address)).toBe(9n * USDC);
  });

  it('one transaction that spends our nonce on a payment elsewhere and pays the merchant on another authorization of the payer does not settle ours: the transfer must follow our AuthorizationUsed', async () => {
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const elsewhere = payTo();
    const ours = await signedProof(payer, merchant, USDC);
    const spoiler = await signedProof(payer, elsewhere, 1n, { nonce: ours.authorization.nonce });
    const another = await signedProof(payer, merchant, USDC);
    const dev = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), chain: base, transport: http(anvil.rpcUrl) });
    const batch = await dev.writeContract({
      address: MULTICALL3_ADDRESS,
      abi: MULTICALL3_ABI,
      functionName: 'tryAggregate',
      args: [true, [spoiler, another].map((p) => ({ target: USDC_BASE, callData: transferCalldata(p) }))],
    });
    expect((await anvil.client.waitForTransactionReceipt({ hash: batch, pollingInterval: 50 })).status).toBe('success');
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
    expect(await anvil.usdcBalance(elsewhere)).toBe(1n);

    const refused = { code: 'NONCE_ALREADY_USED', human: expect.stringContaining(batch) };
    expect(await f.verify(ours, nowSec())).toEqual({ ok: false, ...refused });
    expect(await f.settle(ours, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).toEqual({ status: 'failed', ...refused });
    expect(await f.reconcile({ proof: ours, broadcasts: [], nowSec: nowSec() })).toEqual({ status: 'failed', ...refused });
    // the authorization the batch did carry to the merchant settles, with that transaction
    expect(await f.settle(another, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).toEqual({ status: 'settled', reference: batch });
  });

  it('a flight whose chain reads keep failing is retried every poll but warned about once a minute, naming the cause (a token answering nothing), not an unreachable node', async () => {
    const lines: { level: number; msg: string; cause?: string }[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const rpc = await countingRpcProxy(anvil.rpcUrl);
    const fac = new OnchainFacilitator({ rpcUrl: rpc.url, privateKeys: keys.slice(0, 1), chain: 'base', log, options: { pollMs: 20 } });
    const payer = await fundedPayer(anvil, 10n * USDC);
    const proof = await signedProof(payer, payTo(), USDC);
    const rec = recorder();
    await anvil.setAutomine(false);
    try {
      expect(await fac.settle(proof, { nowSec: nowSec(), waitMs: 100, recordBroadcast: rec.recordBroadcast })).toMatchObject({ status: 'pending' });
      // the token's code goes away under the flight: our transfer is mined as a call that moves nothing
      await anvil.installToken('none');
      await anvil.mine();
      rpc.reset();
      // at least 25 passes of the monitor that each fail (it reads the authorization's state every pass)
      while ((rpc.counts.get('eth_call') ?? 0) < 25) await new Promise((r) => setTimeout(r, 20));
      const warned = lines.filter((l) => l.msg.startsWith('onchain facilitator watch failed'));
      expect(warned).toHaveLength(1);
      expect(warned[0]!.cause).toMatch(/returned no data/);
      expect(lines.filter((l) => /unreachable/.test(JSON.stringify(l)))).toEqual([]);
    } finally {
      await anvil.installToken('usdc');
      await anvil.setAutomine(true);
      await fac.close();
      await rpc.close();
    }
  });

  it('reconcile: nothing recorded is failed; a recorded-but-unsent tx is re-sent while its nonce is free, dead once the nonce is taken', async () => {
    const fac = facilitatorOn(anvil, keys.slice(1, 2));
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();

    const never = await signedProof(payer, merchant, USDC);
    expect(await fac.reconcile({ proof: never, broadcasts: [], nowSec: nowSec() })).toMatchObject({ status: 'failed', code: 'CAPTURE_FAILED' });

    // crash between recording and sending: the record exists, the node never saw the tx
    const crashOnce = async (p: Awaited<ReturnType<typeof signedProof>>) => {
      const kept: BroadcastRecord[] = [];
      const saving = recorder(async (r) => {
        kept.push(r);
        throw new Error('simulated crash after recording');
      });
      await expect(fac.settle(p, { nowSec: nowSec(), waitMs: 5_000, recordBroadcast: saving.recordBroadcast })).rejects.toThrow(/simulated crash/);
      return kept;
    };

    const resent = await signedProof(payer, merchant, USDC);
    const kept1 = await crashOnce(resent);
    expect(kept1).toHaveLength(1);
    expect(await anvil.rpc('eth_getTransactionByHash', [kept1[0]!.txHash])).toBeNull();
    // nonce still free: reconcile re-sends the exact bytes (automine mines them)
    const r1 = await fac.reconcile({ proof: resent, broadcasts: kept1, nowSec: nowSec() });
    expect(['pending', 'settled']).toContain(r1.status);
    // anvil's automine can answer the send before the block holding it is visible: wait for the mined receipt
    await anvil.client.waitForTransactionReceipt({ hash: kept1[0]!.txHash as Hex, pollingInterval: 50 });
    expect(await fac.reconcile({ proof: resent, broadcasts: kept1, nowSec: nowSec() })).toEqual({ status: 'settled', reference: kept1[0]!.txHash });

    const dead = await signedProof(payer, merchant, USDC);
    const kept2 = await crashOnce(dead);
    // another settle takes the released nonce, so the recorded tx can never be mined
    const next = await fac.settle(await signedProof(payer, merchant, USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast });
    expect(next.status).toBe('settled');
    expect(await fac.reconcile({ proof: dead, broadcasts: kept2, nowSec: nowSec() })).toMatchObject({ status: 'failed', code: 'CAPTURE_FAILED' });
    expect(await anvil.usdcBalance(merchant)).toBe(2n * USDC);
    await fac.close();
  });

  it('a relayer nonce used behind our back ("nonce too low") is resynced and the settle still goes through', async () => {
    const fac = facilitatorOn(anvil, keys.slice(2, 3));
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    expect((await fac.settle(await signedProof(payer, merchant, USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast })).status).toBe('settled');
    const outsider = createWalletClient({ account: privateKeyToAccount(keys[2]!), chain: base, transport: http(anvil.rpcUrl) });
    for (let i = 0; i < 2; i++) await anvil.client.waitForTransactionReceipt({ hash: await outsider.sendTransaction({ to: merchant, value: 1n }), pollingInterval: 50 });
    const rec = recorder();
    const out = await fac.settle(await signedProof(payer, merchant, USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
    expect(out).toEqual({ status: 'settled', reference: rec.records.at(-1)!.txHash });
    expect(rec.records).toHaveLength(2);
    expect(rec.records[1]!.relayerNonce).toBe(rec.records[0]!.relayerNonce! + 2);
    // the stale record can never be mined: its nonce is taken
    expect(await fac.reconcile({ proof: await signedProof(payer, merchant, USDC), broadcasts: rec.records.slice(0, 1), nowSec: nowSec() })).toMatchObject({ status: 'failed' });
    expect(await anvil.usdcBalance(merchant)).toBe(2n * USDC);
    await fac.close();
  });

  it('health reports chain id, block and relayer balances; not ok below the minimum or when the RPC is down', async () => {
    const h = await f.health();
    expect(h.ok).toBe(true);
    expect(h.detail).toMatchObject({ facilitator: 'onchain', rpc: { ok: true, chainId: 8453 }, relayers: [{ address: f.relayerAddresses[0], balance_wei: expect.stringMatching(/^\d+$/), ok: true }] });
    expect(JSON.stringify(h)).not.toContain(keys[0]!.slice(2));
    const poor = facilitatorOn(anvil, [generatePrivateKey()]);
    expect((await poor.health()).ok).toBe(false);
    const down = new OnchainFacilitator({ rpcUrl: 'http://127.0.0.1:1', privateKeys: keys.slice(0, 1), chain: 'base', log: silentLog() });
    expect(await down.health()).toMatchObject({ ok: false, detail: { rpc: { ok: false } } });
    const proof = await signedProof(privateKeyToAccount(generatePrivateKey()), payTo(), USDC);
    await expect(down.verify(proof, nowSec())).rejects.toMatchObject({ codes: ['FACILITATOR_UNAVAILABLE'], status: 503 });
  });
});

describe('OnchainFacilitator on anvil (--block-time 1)', () => {
  let anvil: Anvil;
  let keys: Hex[];

  beforeAll(async () => {
    anvil = await startAnvil({ blockTime: 1 });
    keys = await fundedRelayers(anvil, 4);
  });
  afterAll(async () => {
    await anvil?.stop();
  });

  for (const relayerCount of [1, 4]) {
    it(`16 concurrent settles through ${relayerCount} relayer(s) are all mined`, async () => {
      const { fac, merchant, outs, rec } = await settleSixteen(anvil, keys.slice(0, relayerCount), 'block-time 1');
      expect(outs.map((o) => o.status)).toEqual(Array(16).fill('settled'));
      expect(rec.records).toHaveLength(16);
      expect(await anvil.usdcBalance(merchant)).toBe(16n * USDC);
      await fac.close();
    });
  }

  it('a stuck tx (the base fee jumps above its cap) is replaced with bumped fees under the same relayer nonce, the replacement is mined, and the relayer goes on', async () => {
    const fac = facilitatorOn(anvil, keys.slice(3, 4));
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    let sentAt = 0;
    let resumed: Promise<void> = Promise.resolve();
    const rec = recorder(async (r, n) => {
      if (n > 0) return;
      sentAt = performance.now();
      // No block until the first broadcast is in the pool; then the next block's base fee jumps far
      // above its maxFeePerGas (the node refuses a transaction below it at the door, so only
      // once it is in), and it cannot be mined until a replacement outbids the jump.
      await anvil.rpc('evm_setIntervalMining', [0]);
      resumed = (async () => {
        while (!(await anvil.rpc('eth_getTransactionByHash', [r.txHash]))) await new Promise((res) => setTimeout(res, 10));
        await anvil.rpc('anvil_setNextBlockBaseFeePerGas', [`0x${(2000n * 10n ** 9n).toString(16)}`]);
        await anvil.rpc('evm_setIntervalMining', [1]);
      })();
    });
    let out;
    try {
      out = await fac.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast });
    } finally {
      await resumed;
      await anvil.rpc('evm_setIntervalMining', [1]);
    }
    console.log(`stuck tx: ${rec.records.length} broadcasts, settled ${Math.round(performance.now() - sentAt)} ms after the first (printed, not asserted)`);
    expect(rec.records.length).toBeGreaterThanOrEqual(2);
    expect(new Set(rec.records.map((r) => r.relayerNonce)).size).toBe(1);
    expect(out).toEqual({ status: 'settled', reference: rec.records.at(-1)!.txHash });
    // the first broadcast was never mined: its replacement took the nonce
    await expect(anvil.client.getTransactionReceipt({ hash: rec.records[0]!.txHash })).rejects.toThrow(/could not be found/);
    const first = parseTransaction(rec.records[0]!.rawTx!);
    const last = parseTransaction(rec.records.at(-1)!.rawTx!);
    expect(last.maxFeePerGas! * 100n).toBeGreaterThanOrEqual(first.maxFeePerGas! * 125n);
    expect(last.maxFeePerGas!).toBeGreaterThan(first.maxFeePerGas!);
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
    // the relayer's next nonce is free again
    const again = await fac.settle(await signedProof(payer, merchant, USDC), { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: recorder().recordBroadcast });
    expect(again.status).toBe('settled');
    await fac.close();
  });

  it('the same authorization sent by two relayers: one mines, the other reverts, and both report the winner as settled', async () => {
    const fac = facilitatorOn(anvil, keys.slice(0, 2), { gasLimit: 150_000n });
    const payer = await fundedPayer(anvil, 10n * USDC);
    const merchant = payTo();
    const proof = await signedProof(payer, merchant, USDC);
    const rec = recorder();
    const outs = await Promise.all([0, 1].map(() => fac.settle(proof, { nowSec: nowSec(), waitMs: WAIT_MS, recordBroadcast: rec.recordBroadcast })));
    expect(rec.records).toHaveLength(2);
    expect(new Set(rec.records.map((r) => r.relayer)).size).toBe(2);
    const receipts = await Promise.all(rec.records.map((r) => anvil.client.getTransactionReceipt({ hash: r.txHash })));
    const winner = rec.records[receipts.findIndex((r) => r.status === 'success')]!.txHash;
    expect(receipts.map((r) => r.status).sort()).toEqual(['reverted', 'success']);
    expect(outs).toEqual([
      { status: 'settled', reference: winner },
      { status: 'settled', reference: winner },
    ]);
    expect(await anvil.usdcBalance(merchant)).toBe(USDC);
    await fac.close();
  });

  it('a tx not mined within waitMs is pending with its hash; the monitor keeps it going and reconcile finds it settled once it is mined', async () => {
    const fac = facilitatorOn(anvil, keys.slice(2, 3));
    const payer = await fundedPayer(anvil, 10n * USDC);
    const proof = await signedProof(payer, payTo(), USDC);
    const rec = recorder();
    // no block is made until the settle has answered: it cannot be mined within its bound
    await anvil.rpc('evm_setIntervalMining', [0]);
    let out;
    try {
      out = await fac.settle(proof, { nowSec: nowSec(), waitMs: 50, recordBroadcast: rec.recordBroadcast });
    } finally {
      await anvil.rpc('evm_setIntervalMining', [1]);
    }
    expect(out).toEqual({ status: 'pending', reference: rec.records[0]!.txHash });
    // until the relayer's nonce is mined (by the first broadcast or a replacement the monitor sent)
    const { relayer, relayerNonce } = rec.records[0]!;
    while ((await anvil.client.getTransactionCount({ address: relayer as Hex })) <= relayerNonce!) await new Promise((r) => setTimeout(r, 100));
    const settled = await fac.reconcile({ proof, broadcasts: rec.records, nowSec: nowSec() });
    expect(settled.status).toBe('settled');
    expect(rec.records.map((r) => r.txHash)).toContain(settled.status === 'settled' ? settled.reference : null);
    await fac.close();
  });
});
