import { randomBytes } from 'node:crypto';
import { threadId } from 'node:worker_threads';
import { Wallet, verifyTypedData } from 'ethers';
import { hashTypedData, recoverTypedDataAddress, toHex, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { afterAll, describe, expect, it } from 'vitest';
import { CHAINS, TRANSFER_WITH_AUTHORIZATION_TYPES } from '@svc/contract';
import { canonicalSignature, checkAuthorization, recoverInJavaScript, transferTypedData, type Authorization } from '../../src/lib/eip3009.js';
import { nativeSecp256k1, recoverAddressNative } from '../../src/lib/secp256k1-native.js';
import { defaultSignerThreads, SignerRecovery } from '../../src/lib/signer-recovery.js';

const NOW = 1_760_000_000;
const payTo = privateKeyToAccount(generatePrivateKey()).address;

const authOf = (from: string): Authorization => ({
  from,
  to: payTo,
  value: String(1 + (randomBytes(4).readUInt32BE() % 10_000_000)),
  validAfter: NOW - 600,
  validBefore: NOW + 300,
  nonce: toHex(randomBytes(32)),
});

/** The same authorization signed by ethers (an implementation independent of viem). */
async function signWithEthers(wallet: Wallet, a: Authorization): Promise<Hex> {
  const c = CHAINS['base-sepolia'];
  return (await wallet.signTypedData(
    { name: c.domainName, version: c.domainVersion, chainId: c.chainId, verifyingContract: c.usdc },
    { TransferWithAuthorization: [...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization] },
    { ...a },
  )) as Hex;
}

const pools: SignerRecovery[] = [];
/** The worker-thread fallback, as a platform without the native binding runs it. */
const pool = (threads: number) => {
  const p = new SignerRecovery(threads, undefined, { native: false });
  pools.push(p);
  return p;
};
afterAll(async () => {
  for (const p of pools) await p.close();
});

/** One signature recovered right, and no thread started or used. */
async function expectRecoveredOnCallingThread(p: SignerRecovery) {
  const account = privateKeyToAccount(generatePrivateKey());
  const td = transferTypedData('base-sepolia', authOf(account.address));
  expect(await p.recover(hashTypedData(td), await account.signTypedData(td))).toBe(account.address);
  await p.whenReady();
  expect(p.runningThreads).toBe(0);
  expect(p.recoveredInThreads).toBe(0);
}

describe('signer recovery on libsecp256k1 (services.signers, native)', () => {
  it('GIVEN this machine THEN the native binding loads and services.signers uses it on the calling thread, with no pool', async () => {
    const p = new SignerRecovery(2);
    pools.push(p);
    expect(nativeSecp256k1()).not.toBeNull();
    expect(p.mode).toBe('native');
    expect(p.nativeUnavailable).toBeUndefined();
    await expectRecoveredOnCallingThread(p);
  });

  it('GIVEN authorizations signed by viem and by ethers, v as 27/28 or 0/1 THEN the native signer is exactly what viem and ethers recover', async () => {
    const native = nativeSecp256k1()!;
    for (let i = 0; i < 40; i++) {
      const key = generatePrivateKey();
      const account = privateKeyToAccount(key);
      const a = authOf(account.address);
      const td = transferTypedData('base-sepolia', a);
      const signed = i % 2 === 0 ? await account.signTypedData(td) : await signWithEthers(new Wallet(key), a);
      // y-parity as 0/1 instead of 27/28 on every fourth
      const signature = (i % 4 === 1 ? signed.slice(0, 130) + (parseInt(signed.slice(130), 16) - 27).toString(16).padStart(2, '0') : signed) as Hex;
      const digest = hashTypedData(td);
      const byNative = recoverAddressNative(native, digest, signature);
      expect(byNative).toBe(account.address);
      expect(byNative).toBe(await recoverInJavaScript(digest, signature));
      expect(byNative).toBe(await recoverTypedDataAddress({ ...td, signature }));
    }
  });

  it('GIVEN a wrong signer, a signature that is not a point, and a bad v THEN the native check gives the JavaScript check\'s verdicts', async () => {
    const p = new SignerRecovery(0);
    pools.push(p);
    expect(p.mode).toBe('native');
    const key = generatePrivateKey();
    const account = privateKeyToAccount(key);
    const a = authOf(account.address);
    const good = await signWithEthers(new Wallet(key), a);
    const wrong = await privateKeyToAccount(generatePrivateKey()).signTypedData(transferTypedData('base-sepolia', a));
    const unrecoverable = `0x${'00'.repeat(32)}${'11'.repeat(32)}1b` as Hex;
    const badV = `${good.slice(0, 130)}1d` as Hex;
    for (const signature of [good, wrong, unrecoverable, badV]) {
      const input = { chain: 'base-sepolia' as const, payTo, amountBaseUnits: a.value, auth: { ...a, nonce: toHex(randomBytes(32)) }, signature, nowSec: NOW };
      expect(await checkAuthorization({ ...input, signers: p })).toEqual(await checkAuthorization({ ...input, signers: { recover: recoverInJavaScript } }));
    }
    const native = nativeSecp256k1()!;
    expect(() => recoverAddressNative(native, hashTypedData(transferTypedData('base-sepolia', a)), unrecoverable)).toThrow();
    expect(() => recoverAddressNative(native, hashTypedData(transferTypedData('base-sepolia', a)), badV)).toThrow(/v 29/);
  });
});

describe('signer recovery in worker threads (services.signers, where no native binding loads)', () => {
  it('GIVEN a new pool THEN no thread runs until the first recovery, which does not wait for one; once warm, recoveries run in the threads; close stops them', async () => {
    const p = pool(2);
    expect(p.runningThreads).toBe(0);
    const account = privateKeyToAccount(generatePrivateKey());
    const sign = async () => {
      const td = transferTypedData('base-sepolia', authOf(account.address));
      return { digest: hashTypedData(td), signature: await account.signTypedData(td) };
    };
    const first = await sign();
    expect(await p.recover(first.digest, first.signature)).toBe(account.address);
    expect(p.runningThreads).toBeGreaterThanOrEqual(1);
    await p.whenReady();
    // Only the warm-up ran in a thread: the first recovery was answered on this thread while
    // the pool booted (a thread under tsx takes 1-2 s), not after waiting for it.
    expect(p.recoveredInThreads).toBe(1);
    const before = p.recoveredInThreads;
    for (let i = 0; i < 5; i++) {
      const s = await sign();
      expect(await p.recover(s.digest, s.signature)).toBe(account.address);
    }
    expect(p.recoveredInThreads - before).toBe(5);
    await p.close();
    expect(p.runningThreads).toBe(0);
  });

  it('GIVEN authorizations signed by viem and by ethers WHEN the pool recovers them THEN each signer is exactly what viem and ethers recover on this thread', async () => {
    const p = pool(2);
    await p.whenReady();
    const cases: Array<{ a: Authorization; signature: Hex; expected: string }> = [];
    for (let i = 0; i < 20; i++) {
      const key = generatePrivateKey();
      const account = privateKeyToAccount(key);
      const a = authOf(account.address);
      const signature = i % 2 === 0 ? await account.signTypedData(transferTypedData('base-sepolia', a)) : await signWithEthers(new Wallet(key), a);
      cases.push({ a, signature, expected: account.address });
    }
    const pooled = await Promise.all(cases.map(({ a, signature }) => p.recover(hashTypedData(transferTypedData('base-sepolia', a)), signature)));
    for (const [i, { a, signature, expected }] of cases.entries()) {
      const td = transferTypedData('base-sepolia', a);
      const byViem = await recoverTypedDataAddress({ ...td, signature });
      const c = CHAINS['base-sepolia'];
      const byEthers = verifyTypedData(
        { name: c.domainName, version: c.domainVersion, chainId: c.chainId, verifyingContract: c.usdc },
        { TransferWithAuthorization: [...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization] },
        { ...a },
        signature,
      );
      expect(pooled[i]).toBe(expected);
      expect(pooled[i]).toBe(byViem);
      expect(pooled[i]).toBe(byEthers);
    }
    expect(p.recoveredInThreads).toBeGreaterThanOrEqual(1 + cases.length);
  });

  it('GIVEN the check a facilitator runs WHEN it uses the pool THEN the verdicts match the on-thread check, a wrong signer and an unrecoverable signature included', async () => {
    const p = pool(1);
    await p.whenReady();
    const key = generatePrivateKey();
    const account = privateKeyToAccount(key);
    const other = privateKeyToAccount(generatePrivateKey());
    const a = authOf(account.address);
    const good = await signWithEthers(new Wallet(key), a);
    const wrong = await other.signTypedData(transferTypedData('base-sepolia', a));
    // r = 0 is not a point: viem throws, and so must the pool.
    const unrecoverable = `0x${'00'.repeat(32)}${'11'.repeat(32)}1b` as Hex;
    for (const signature of [good, wrong, unrecoverable]) {
      const input = { chain: 'base-sepolia' as const, payTo, amountBaseUnits: a.value, auth: { ...a, nonce: toHex(randomBytes(32)) }, signature, nowSec: NOW };
      const onThread = await checkAuthorization(input);
      const pooled = await checkAuthorization({ ...input, signers: p });
      expect(pooled).toEqual(onThread);
    }
    expect(await checkAuthorization({ chain: 'base-sepolia', payTo, amountBaseUnits: a.value, auth: a, signature: good, nowSec: NOW, signers: p })).toMatchObject({ ok: true });
    expect(await checkAuthorization({ chain: 'base-sepolia', payTo, amountBaseUnits: a.value, auth: a, signature: wrong, nowSec: NOW, signers: p })).toMatchObject({
      ok: false,
      code: 'SIGNER_MISMATCH',
    });
    expect(canonicalSignature(good)).toBe(good);
  });

  it('GIVEN the pool WHEN it recovers THEN the work runs on threads other than the caller', async () => {
    const p = pool(1);
    await p.whenReady();
    const ids = (p as unknown as { pool: { threads: Array<{ threadId: number }> } }).pool.threads.map((t) => t.threadId);
    expect(ids.length).toBe(1);
    expect(ids).not.toContain(threadId);
  });

  it('GIVEN threads: 0 and no native binding THEN recovery stays on the calling thread and no thread starts', async () => {
    const p = pool(0);
    await expectRecoveredOnCallingThread(p);
  });

  it('sizes the pool from the cores the request threads leave, at least one per process', () => {
    expect(defaultSignerThreads(1, 2)).toBe(1);
    expect(defaultSignerThreads(1, 4)).toBe(3);
    expect(defaultSignerThreads(2, 2)).toBe(1);
    expect(defaultSignerThreads(4, 2)).toBe(1);
    expect(defaultSignerThreads(2, 16)).toBe(7);
  });
});
