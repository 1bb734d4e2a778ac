import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { hashTypedData, toHex, type Hex } from 'viem';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { canonicalSignature, checkAuthorization, RecoveredSigners, recoverAuthorizationSigner, recoverInJavaScript, transferDigest, transferTypedData, type Authorization } from '../../src/lib/eip3009.js';
import { CHAINS, type ChainName } from '@svc/contract';

const NOW = 1_760_000_000;
const payer = privateKeyToAccount(generatePrivateKey());
const payTo = privateKeyToAccount(generatePrivateKey()).address;
const AMOUNT = '25300000';

function auth(over: Partial<Authorization> = {}): Authorization {
  return {
    from: payer.address,
    to: payTo,
    value: AMOUNT,
    validAfter: NOW - 600,
    validBefore: NOW + 300,
    nonce: toHex(randomBytes(32)),
    ...over,
  };
}

async function sign(a: Authorization, domainName?: string, account = payer): Promise<Hex> {
  return account.signTypedData(transferTypedData('base-sepolia', a, domainName));
}

async function check(a: Authorization, signature: string, over: { amountBaseUnits?: string; nowSec?: number; payTo?: string } = {}) {
  return checkAuthorization({
    chain: 'base-sepolia',
    payTo: over.payTo ?? payTo,
    amountBaseUnits: over.amountBaseUnits ?? AMOUNT,
    auth: a,
    signature,
    nowSec: over.nowSec ?? NOW,
  });
}

describe('transferTypedData', () => {
  it('builds the USDC domain of the chain, not payTo, with bigint fields', () => {
    const a = auth();
    const td = transferTypedData('base-sepolia', a);
    expect(td.domain).toEqual({ name: 'USDC', version: '2', chainId: 84532, verifyingContract: CHAINS['base-sepolia'].usdc });
    expect(transferTypedData('base', a).domain).toEqual({ name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: CHAINS.base.usdc });
    expect(td.primaryType).toBe('TransferWithAuthorization');
    expect(td.message.value).toBe(25300000n);
    expect(td.message.validAfter).toBe(BigInt(NOW - 600));
    expect(td.message.validBefore).toBe(BigInt(NOW + 300));
    expect(transferTypedData('base-sepolia', a, 'USD Coin').domain.name).toBe('USD Coin');
  });
});

describe('transferDigest', () => {
  it("GIVEN any authorization on any chain THEN it is viem's hashTypedData of transferTypedData, byte for byte", () => {
    const u256 = (bytes: number) => BigInt(toHex(randomBytes(bytes))).toString();
    const edges: Array<Partial<Authorization>> = [
      { value: '0', validAfter: 0, validBefore: 0, nonce: `0x${'00'.repeat(32)}` },
      { value: ((1n << 256n) - 1n).toString(), validAfter: Number.MAX_SAFE_INTEGER, validBefore: Number.MAX_SAFE_INTEGER, nonce: `0x${'ff'.repeat(32)}` },
      { from: `0x${'00'.repeat(20)}`, to: `0x${'ff'.repeat(20)}` },
      { from: payer.address.toLowerCase(), to: payTo.toUpperCase().replace('0X', '0x') },
    ];
    const cases: Authorization[] = [...edges.map((e) => auth(e))];
    for (let i = 0; i < 50; i++) {
      cases.push(auth({ from: toHex(randomBytes(20)), to: toHex(randomBytes(20)), value: u256(1 + (i % 32)), validAfter: randomBytes(4).readUInt32BE(), validBefore: randomBytes(6).readUIntBE(0, 6) }));
    }
    for (const chain of Object.keys(CHAINS) as ChainName[]) {
      for (const a of cases) expect(transferDigest(chain, a)).toBe(hashTypedData(transferTypedData(chain, a)));
    }
  });
});

describe('transferDigest refuses numbers outside uint256', () => {
  it('GIVEN a value of 2^256 or below zero THEN RangeError, not a digest of other bytes', () => {
    expect(() => transferDigest('base', auth({ value: (1n << 256n).toString() }))).toThrow('uint256 out of range');
    expect(() => transferDigest('base', auth({ value: '-1' }))).toThrow(RangeError);
    expect(transferDigest('base', auth({ value: ((1n << 256n) - 1n).toString() }))).toMatch(/^0x[0-9a-f]{64}$/);
  });
});

describe('canonicalSignature: the one form FiatToken accepts', () => {
  const N = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n;
  const r = '11'.repeat(32);
  const sig = (s: bigint, v: number) => `0x${r}${s.toString(16).padStart(64, '0')}${v.toString(16).padStart(2, '0')}` as Hex;

  it('GIVEN v as y-parity 0/1 THEN 27/28; GIVEN any other v THEN null', () => {
    expect(canonicalSignature(sig(5n, 0))).toBe(sig(5n, 27));
    expect(canonicalSignature(sig(5n, 1))).toBe(sig(5n, 28));
    expect(canonicalSignature(sig(5n, 27))).toBe(sig(5n, 27));
    for (const v of [2, 26, 29, 0x1d, 255]) expect(canonicalSignature(sig(5n, v)), String(v)).toBeNull();
  });

  it('GIVEN s = 0 or s >= n THEN null; GIVEN s > n/2 THEN the mirrored low s with v flipped; s = n/2 stays', () => {
    expect(canonicalSignature(sig(0n, 27))).toBeNull();
    expect(canonicalSignature(sig(N, 27))).toBeNull();
    expect(canonicalSignature(sig(N + 1n, 28))).toBeNull();
    expect(canonicalSignature(sig(N - 1n, 27))).toBe(sig(1n, 28));
    expect(canonicalSignature(sig(N - 1n, 0))).toBe(sig(1n, 28));
    expect(canonicalSignature(sig(N / 2n + 1n, 28))).toBe(sig(N - (N / 2n + 1n), 27));
    expect(canonicalSignature(sig(N / 2n, 27))).toBe(sig(N / 2n, 27));
  });

  it('GIVEN a real high-s signature THEN it checks as the same signer, canonical (low s)', async () => {
    const a = auth();
    const low = await sign(a);
    const s = BigInt(`0x${low.slice(66, 130)}`);
    const v = parseInt(low.slice(130), 16);
    const high = sig(N - s, v === 27 ? 28 : 27).replace(r, low.slice(2, 66)) as Hex;
    const r2 = await check(a, high);
    expect(r2).toMatchObject({ ok: true, signature: low });
  });
});

describe('recoverAuthorizationSigner', () => {
  it('recovers the signing account', async () => {
    const a = auth();
    expect(await recoverAuthorizationSigner('base-sepolia', a, await sign(a))).toBe(payer.address);
    // viem's recovery, used where the native binding does not load, agrees
    const b = auth();
    const sb = await sign(b);
    expect(await recoverInJavaScript(transferDigest('base-sepolia', b), sb)).toBe(payer.address);
  });
});

describe('checkAuthorization', () => {
  it('GIVEN a correctly signed authorization THEN ok', async () => {
    const a = auth();
    expect(await check(a, await sign(a))).toMatchObject({ ok: true });
  });

  it('accepts lower-case addresses and payTo in another case', async () => {
    const a = auth({ from: payer.address.toLowerCase(), to: payTo.toLowerCase() });
    const r = await check(a, await sign(a), { payTo: payTo.toUpperCase().replace('0X', '0x') });
    expect(r).toMatchObject({ ok: true });
    // The replay key (chain, payer, nonce) is built from this canonical form: one spelling per payer.
    expect(r.ok && r.authorization.from).toBe(payer.address);
    expect(r.ok && r.authorization.nonce).toBe(a.nonce.toLowerCase());
  });

  it("GIVEN a signature under the wrong domain name ('USD Coin' on base-sepolia) THEN SIGNER_MISMATCH", async () => {
    const a = auth();
    const r = await check(a, await sign(a, 'USD Coin'));
    expect(r).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH' });
    expect(!r.ok && r.human).toContain('"USDC"');
  });

  it('GIVEN a signature by another key THEN SIGNER_MISMATCH', async () => {
    const a = auth();
    const other = privateKeyToAccount(generatePrivateKey());
    expect(await check(a, await sign(a, undefined, other))).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH' });
  });

  it('GIVEN a signature over a different message (value changed after signing) THEN SIGNER_MISMATCH', async () => {
    const a = auth({ value: '1' });
    const sig = await sign(a);
    expect(await check({ ...a, value: AMOUNT }, sig)).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH' });
  });

  it('GIVEN a proof checked once (its signer remembered) WHEN any signed field or the chain differs THEN the signer is recovered anew, not taken from the memo', async () => {
    const a = auth();
    const sig = await sign(a);
    const memo = new RecoveredSigners();
    expect(await checkAuthorization({ chain: 'base-sepolia', payTo, amountBaseUnits: AMOUNT, auth: a, signature: sig, nowSec: NOW, signers: { recover: recoverInJavaScript, recovered: memo } })).toMatchObject({ ok: true });
    const recovered: string[] = [];
    const counting = async (digest: Hex, signature: Hex) => {
      recovered.push(digest);
      return (await import('viem')).recoverAddress({ hash: digest, signature });
    };
    const signers = { recover: counting, recovered: memo };
    // the same proof again: the memo answers, no recovery
    expect(await recoverAuthorizationSigner('base-sepolia', a, sig, signers)).toBe(payer.address);
    expect(recovered).toHaveLength(0);
    const variants: Array<[string, Authorization, 'base' | 'base-sepolia']> = [
      ['from', { ...a, from: payTo }, 'base-sepolia'],
      ['to', { ...a, to: payer.address }, 'base-sepolia'],
      ['value', { ...a, value: '1' }, 'base-sepolia'],
      ['validAfter', { ...a, validAfter: a.validAfter + 1 }, 'base-sepolia'],
      ['validBefore', { ...a, validBefore: a.validBefore + 1 }, 'base-sepolia'],
      ['nonce', { ...a, nonce: toHex(randomBytes(32)) }, 'base-sepolia'],
      ['chain', a, 'base'],
    ];
    for (const [field, variant, chain] of variants) {
      expect(await recoverAuthorizationSigner(chain, variant, sig, signers), field).not.toBe(payer.address);
    }
    expect(recovered).toHaveLength(variants.length);
  });

  it('GIVEN an unrecoverable signature (invalid v byte) THEN SIGNER_MISMATCH, not an exception', async () => {
    const a = auth();
    const sig = `0x${'11'.repeat(64)}05` as Hex;
    expect(await check(a, sig)).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH' });
  });

  it('GIVEN value != amountBaseUnits THEN PAYMENT_AMOUNT_MISMATCH', async () => {
    const a = auth({ value: '25299999' });
    expect(await check(a, await sign(a))).toMatchObject({ ok: false, code: 'PAYMENT_AMOUNT_MISMATCH' });
  });

  it('GIVEN value greater than amountBaseUnits (an overpayment) THEN PAYMENT_AMOUNT_MISMATCH: the amount is exact, not a minimum', async () => {
    for (const value of ['25300001', '253000000', ((1n << 256n) - 1n).toString()]) {
      const a = auth({ value });
      expect(await check(a, await sign(a)), value).toMatchObject({ ok: false, code: 'PAYMENT_AMOUNT_MISMATCH' });
    }
  });

  it('compares amounts as integers (leading zeros are the same amount)', async () => {
    const a = auth({ value: '025300000' });
    expect(await check(a, await sign(a))).toMatchObject({ ok: true });
  });

  it('GIVEN to != payTo THEN PAYMENT_RECIPIENT_MISMATCH', async () => {
    const a = auth({ to: privateKeyToAccount(generatePrivateKey()).address });
    expect(await check(a, await sign(a))).toMatchObject({ ok: false, code: 'PAYMENT_RECIPIENT_MISMATCH' });
  });

  it('GIVEN validBefore < now + 6 THEN PAYMENT_EXPIRED; now + 6 is still valid', async () => {
    const expired = auth({ validBefore: NOW + 5 });
    expect(await check(expired, await sign(expired))).toMatchObject({ ok: false, code: 'PAYMENT_EXPIRED' });
    const past = auth({ validBefore: NOW - 1 });
    expect(await check(past, await sign(past))).toMatchObject({ ok: false, code: 'PAYMENT_EXPIRED' });
    const edge = auth({ validBefore: NOW + 6 });
    expect(await check(edge, await sign(edge))).toMatchObject({ ok: true });
  });

  it('GIVEN validAfter > now THEN PAYMENT_NOT_YET_VALID; validAfter == now is valid', async () => {
    const early = auth({ validAfter: NOW + 1 });
    expect(await check(early, await sign(early))).toMatchObject({ ok: false, code: 'PAYMENT_NOT_YET_VALID' });
    const edge = auth({ validAfter: NOW });
    expect(await check(edge, await sign(edge))).toMatchObject({ ok: true });
  });

  it('GIVEN a malformed nonce THEN PAYMENT_MALFORMED', async () => {
    const good = auth();
    const sig = await sign(good);
    for (const nonce of ['0x1234', good.nonce.slice(2), `${good.nonce}00`, `0x${'zz'.repeat(32)}`]) {
      expect(await check({ ...good, nonce }, sig)).toMatchObject({ ok: false, code: 'PAYMENT_MALFORMED' });
    }
  });

  it('GIVEN a malformed signature THEN PAYMENT_MALFORMED', async () => {
    const a = auth();
    const sig = await sign(a);
    for (const bad of [sig.slice(0, -2), sig.slice(2), `0x${'g'.repeat(130)}`, `0x${'ab'.repeat(4097)}`, '']) {
      expect(await check(a, bad)).toMatchObject({ ok: false, code: 'PAYMENT_MALFORMED' });
    }
  });

  it('GIVEN a longer signature (a smart wallet\'s, EIP-1271) THEN not malformed: SIGNER_MISMATCH off-chain, handed to the chain as a contract candidate', async () => {
    const a = auth();
    const long = `${await sign(a)}00`;
    expect(await check(a, long)).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH', contract: { signature: long.toLowerCase() } });
  });

  it('GIVEN malformed addresses, value or window THEN PAYMENT_MALFORMED before any other check', async () => {
    const a = auth();
    const sig = await sign(a);
    const cases: Partial<Authorization>[] = [
      { from: '0x1234' },
      { to: `${payTo}00` },
      { value: '-1' },
      { value: '1.5' },
      { value: '' },
      { value: (1n << 256n).toString() },
      { validAfter: 1.5 },
      { validBefore: -1 },
    ];
    for (const over of cases) {
      expect(await check({ ...a, ...over }, sig), JSON.stringify(over)).toMatchObject({ ok: false, code: 'PAYMENT_MALFORMED' });
    }
  });

  it('GIVEN an unknown chain, or an authorization that is not an object THEN PAYMENT_MALFORMED naming it, never a throw', async () => {
    const a = auth();
    const sig = await sign(a);
    const unknown = await checkAuthorization({ chain: 'solana' as ChainName, payTo, amountBaseUnits: AMOUNT, auth: a, signature: sig, nowSec: NOW });
    expect(unknown).toEqual({ ok: false, code: 'PAYMENT_MALFORMED', human: 'Unknown chain solana.' });
    for (const bad of [null, 'x', 7]) {
      expect(await check(bad as never, sig)).toEqual({ ok: false, code: 'PAYMENT_MALFORMED', human: 'payment.authorization must be an object.' });
    }
  });

  it('GIVEN a field of another JSON type whose text would pass (an array of the right string) or the right text after garbage THEN PAYMENT_MALFORMED naming the field', async () => {
    const a = auth();
    const sig = await sign(a);
    const cases: Array<[string, Record<string, unknown>, unknown]> = [
      ['authorization.from', { from: [a.from] }, sig],
      ['authorization.from', { from: `zz${a.from}` }, sig],
      ['authorization.to', { to: [a.to] }, sig],
      ['authorization.to', { to: `zz${a.to}` }, sig],
      ['authorization.value', { value: [a.value] }, sig],
      ['authorization.nonce', { nonce: [a.nonce] }, sig],
      ['authorization.nonce', { nonce: `zz${a.nonce}` }, sig],
      ['validAfter and validBefore', { validAfter: String(a.validAfter) }, sig],
      ['signature', {}, [sig]],
      ['signature', {}, `zz${sig}`],
    ];
    for (const [field, over, signature] of cases) {
      const r = await check({ ...a, ...over } as Authorization, signature as string);
      expect(r, JSON.stringify(over)).toMatchObject({ ok: false, code: 'PAYMENT_MALFORMED', human: expect.stringContaining(field) });
    }
  });

  it('GIVEN validAfter 0 (valid from the epoch, as many clients sign) THEN ok', async () => {
    const a = auth({ validAfter: 0 });
    expect(await check(a, await sign(a))).toMatchObject({ ok: true });
  });

  it('GIVEN each refusal THEN error_human names the values that decided it', async () => {
    const a = auth();
    const other = privateKeyToAccount(generatePrivateKey()).address;
    const wrongTo = auth({ to: other });
    expect(await check(wrongTo, await sign(wrongTo))).toMatchObject({ human: `authorization.to must be the merchant's payTo ${payTo}, got ${other}.` });
    const low = auth({ value: '1' });
    expect(await check(low, await sign(low))).toMatchObject({ human: `authorization.value must be exactly amountBaseUnits ${AMOUNT}, got 1.` });
    const early = auth({ validAfter: NOW + 1 });
    expect(await check(early, await sign(early))).toMatchObject({ human: expect.stringContaining(`valid only after ${NOW + 1} (now ${NOW})`) });
    const late = auth({ validBefore: NOW + 5 });
    expect(await check(late, await sign(late))).toMatchObject({ human: expect.stringContaining(`validBefore ${NOW + 5} must be at least 6 s after now (${NOW})`) });
    expect(await check(a, `0x${'11'.repeat(64)}05`)).toMatchObject({ code: 'SIGNER_MISMATCH', human: expect.stringContaining('v other than 27/28') });
    // r = 0 is no point on the curve: recovery fails, and says so
    expect(await check(a, `0x${'00'.repeat(32)}${'11'.repeat(32)}1b`)).toMatchObject({ code: 'SIGNER_MISMATCH', human: expect.stringContaining('could not be recovered') });
  });

  it('checks in order: recipient before amount before window before signature', async () => {
    const a = auth({ to: privateKeyToAccount(generatePrivateKey()).address, value: '1', validBefore: NOW });
    const unsigned = `0x${'11'.repeat(65)}`;
    expect(await check(a, unsigned)).toMatchObject({ code: 'PAYMENT_RECIPIENT_MISMATCH' });
    expect(await check({ ...a, to: payTo }, unsigned)).toMatchObject({ code: 'PAYMENT_AMOUNT_MISMATCH' });
    expect(await check({ ...a, to: payTo, value: AMOUNT }, unsigned)).toMatchObject({ code: 'PAYMENT_EXPIRED' });
    expect(await check({ ...a, to: payTo, value: AMOUNT, validBefore: NOW + 300 }, unsigned)).toMatchObject({ code: 'SIGNER_MISMATCH' });
  });
});
