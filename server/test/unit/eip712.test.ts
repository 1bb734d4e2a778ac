import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { hashTypedData, toHex, type Hex } from 'viem';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { checkAuthorization, recoverAuthorizationSigner, transferDigest, transferTypedData, type Authorization } from '../../src/lib/eip3009.js';
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

describe('recoverAuthorizationSigner', () => {
  it('recovers the signing account', async () => {
    const a = auth();
    expect(await recoverAuthorizationSigner('base-sepolia', a, await sign(a))).toBe(payer.address);
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
    expect(await check(a, sig)).toMatchObject({ ok: true });
    const recovered: string[] = [];
    const counting = async (digest: Hex, signature: Hex) => {
      recovered.push(digest);
      return (await import('viem')).recoverAddress({ hash: digest, signature });
    };
    // the same proof again: the memo answers, no recovery
    expect(await recoverAuthorizationSigner('base-sepolia', a, sig, counting)).toBe(payer.address);
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
      expect(await recoverAuthorizationSigner(chain, variant, sig, counting), field).not.toBe(payer.address);
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
    for (const bad of [sig.slice(0, -2), `${sig}00`, sig.slice(2), `0x${'g'.repeat(130)}`, '']) {
      expect(await check(a, bad)).toMatchObject({ ok: false, code: 'PAYMENT_MALFORMED' });
    }
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

  it('checks in order: recipient before amount before window before signature', async () => {
    const a = auth({ to: privateKeyToAccount(generatePrivateKey()).address, value: '1', validBefore: NOW });
    const unsigned = `0x${'11'.repeat(65)}`;
    expect(await check(a, unsigned)).toMatchObject({ code: 'PAYMENT_RECIPIENT_MISMATCH' });
    expect(await check({ ...a, to: payTo }, unsigned)).toMatchObject({ code: 'PAYMENT_AMOUNT_MISMATCH' });
    expect(await check({ ...a, to: payTo, value: AMOUNT }, unsigned)).toMatchObject({ code: 'PAYMENT_EXPIRED' });
    expect(await check({ ...a, to: payTo, value: AMOUNT, validBefore: NOW + 300 }, unsigned)).toMatchObject({ code: 'SIGNER_MISMATCH' });
  });
});
