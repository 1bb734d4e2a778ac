import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { encodeAbiParameters, getAddress, keccak256, type Address, type Hex } from 'viem';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ApiError } from '../../src/lib/errors.js';
import { checkAuthorization } from '../../src/lib/eip3009.js';
import {
  cardRailNotImplemented,
  createFacilitators,
  createLiveFacilitator,
  facilitatorFor,
  MockFacilitator,
  OnchainFacilitator,
  RemoteFacilitator,
  settleMockRail,
  UnconfiguredLiveFacilitator,
  type PaymentProof,
} from '../../src/rails/index.js';
import { brokenChecksum, highS, parityV, recorder, signedProof, silentLog } from '../helpers/payments.js';

const NOW = Math.floor(Date.now() / 1000);
const payer = privateKeyToAccount(generatePrivateKey());
const payTo = privateKeyToAccount(generatePrivateKey()).address;
const settleOpts = { nowSec: NOW, waitMs: 1000, recordBroadcast: recorder().recordBroadcast };

const proof = (over: Parameters<typeof signedProof>[3] = {}) => signedProof(payer, payTo, 1_500_000n, { chain: 'base-sepolia', ...over });

describe('MockFacilitator', () => {
  it('GIVEN a valid authorization THEN verify returns the canonical proof and settle a deterministic 0x + 64 hex reference', async () => {
    const f = new MockFacilitator();
    const p = await proof();
    const v = await f.verify(p, NOW);
    expect(v).toEqual({ ok: true, proof: p });
    const s = await f.settle(p, settleOpts);
    const a = p.authorization;
    const expected = keccak256(
      encodeAbiParameters(
        [{ type: 'uint256' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }],
        [84532n, a.from as Address, a.to as Address, 1500000n, a.nonce as Hex],
      ),
    );
    expect(s).toEqual({ status: 'settled', reference: expected });
    expect(await f.reconcile({ proof: p, broadcasts: [], nowSec: NOW })).toEqual(s);
    expect(await f.health()).toMatchObject({ ok: true, detail: { facilitator: 'mock' } });
  });

  it('the reference is deterministic across instances and differs per nonce', async () => {
    const p = await proof();
    const r1 = await new MockFacilitator().settle(p, settleOpts);
    const r2 = await new MockFacilitator().settle(p, { ...settleOpts, nowSec: NOW + 10 });
    const other = await new MockFacilitator().settle(await proof(), settleOpts);
    expect(r1.status).toBe('settled');
    expect(r2).toEqual(r1);
    expect(other).not.toEqual(r1);
  });

  it('GIVEN a chain other than base-sepolia THEN refused before anything else', async () => {
    const p = await proof();
    expect(await new MockFacilitator().settle({ ...p, chain: 'base' }, settleOpts)).toMatchObject({ status: 'failed', code: 'PAYMENT_SCHEME_UNSUPPORTED' });
  });

  it('runs the off-chain checks (a bad signature is SIGNER_MISMATCH, a wrong amount PAYMENT_AMOUNT_MISMATCH)', async () => {
    const p = await proof();
    const forged = await signedProof(privateKeyToAccount(generatePrivateKey()), payTo, 1_500_000n, { chain: 'base-sepolia', nonce: p.authorization.nonce });
    const f = new MockFacilitator();
    expect(await f.settle({ ...p, signature: forged.signature }, settleOpts)).toMatchObject({ status: 'failed', code: 'SIGNER_MISMATCH' });
    expect(await f.verify({ ...p, amountBaseUnits: '1500001' }, NOW)).toMatchObject({ ok: false, code: 'PAYMENT_AMOUNT_MISMATCH' });
    // an authorization for more than is due (value 1500000 for 1499999) is refused as well
    expect(await f.verify({ ...p, amountBaseUnits: '1499999' }, NOW)).toMatchObject({ ok: false, code: 'PAYMENT_AMOUNT_MISMATCH' });
    expect(await f.settle({ ...p, amountBaseUnits: '1499999' }, settleOpts)).toMatchObject({ status: 'failed', code: 'PAYMENT_AMOUNT_MISMATCH' });
  });

  it('GIVEN a payer balance below the value THEN INSUFFICIENT_FUNDS; enough or unlisted passes', async () => {
    const p = await proof();
    const poor = new MockFacilitator({ balances: { [payer.address.toLowerCase()]: 1_499_999n } });
    expect(await poor.verify(p, NOW)).toMatchObject({ ok: false, code: 'INSUFFICIENT_FUNDS' });
    expect(await poor.settle(p, settleOpts)).toMatchObject({ status: 'failed', code: 'INSUFFICIENT_FUNDS' });
    expect(await new MockFacilitator({ balances: { [payer.address]: 1_500_000n } }).settle(p, settleOpts)).toMatchObject({ status: 'settled' });
    expect(await new MockFacilitator({ balances: { [payTo]: 0n } }).settle(p, settleOpts)).toMatchObject({ status: 'settled' });
  });
});

describe('mock parity: what test mode accepts is the canonical form live mode broadcasts', () => {
  const canon = async (p: PaymentProof) => {
    const v = await new MockFacilitator().verify(p, NOW);
    if (!v.ok) throw new Error(`refused: ${v.code}`);
    return v.proof;
  };

  it('v = 0/1 is accepted and canonicalized to the 27/28 bytes the signer produced', async () => {
    const p = await proof();
    const c = await canon({ ...p, signature: parityV(p.signature) });
    expect(c.signature).toBe(p.signature);
    expect(['1b', '1c']).toContain(c.signature.slice(-2));
  });

  it('a high-s signature is accepted and canonicalized to low s (the bytes USDC accepts)', async () => {
    const p = await proof();
    const c = await canon({ ...p, signature: highS(p.signature) });
    expect(c.signature).toBe(p.signature);
    // high s and v = 0/1 together
    expect((await canon({ ...p, signature: parityV(highS(p.signature)) })).signature).toBe(p.signature);
  });

  it('a from with a broken EIP-55 checksum, or all upper-case hex, is accepted and normalized', async () => {
    const p = await proof();
    for (const from of [brokenChecksum(p.authorization.from), '0x' + p.authorization.from.slice(2).toUpperCase(), p.authorization.from.toLowerCase()]) {
      expect(from).not.toBe(p.authorization.from);
      const c = await canon({ ...p, authorization: { ...p.authorization, from } });
      expect(c.authorization.from).toBe(getAddress(p.authorization.from));
    }
  });

  it('the mock and the live facilitators share one canonicalizer (checkAuthorization)', async () => {
    const p = await proof();
    const variant = { ...p, signature: parityV(highS(p.signature)) };
    const shared = await checkAuthorization({ chain: p.chain, payTo, amountBaseUnits: p.amountBaseUnits, auth: variant.authorization, signature: variant.signature, nowSec: NOW });
    expect(shared).toMatchObject({ ok: true, signature: (await canon(variant)).signature });
  });
});

describe('live facilitator selection and rail helpers', () => {
  const baseEnv = { SVC_DATA_DIR: '.data' };

  it('the unconfigured live facilitator throws FACILITATOR_UNAVAILABLE (503) on verify, settle and reconcile', async () => {
    const live = new UnconfiguredLiveFacilitator();
    const p = await proof();
    for (const call of [() => live.verify(), () => live.settle(), () => live.reconcile()]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).codes).toEqual(['FACILITATOR_UNAVAILABLE']);
      expect((err as ApiError).status).toBe(503);
    }
    expect(p.chain).toBe('base-sepolia');
  });

  it('facilitatorFor: test mode is the mock, live mode never the mock', () => {
    const fs = createFacilitators(loadConfig(baseEnv), silentLog());
    expect(facilitatorFor(fs, false)).toBeInstanceOf(MockFacilitator);
    expect(facilitatorFor(fs, false)).toBe(facilitatorFor(fs, false));
    expect(facilitatorFor(fs, true)).toBeInstanceOf(UnconfiguredLiveFacilitator);
  });

  it('SVC_LIVE_FACILITATOR builds the onchain or the remote facilitator', async () => {
    const key = generatePrivateKey();
    const onchain = createLiveFacilitator(
      loadConfig({ ...baseEnv, SVC_LIVE_FACILITATOR: 'onchain', SVC_RPC_URL_BASE: 'http://127.0.0.1:8545', SVC_RELAYER_PRIVATE_KEYS: key }),
      silentLog(),
    );
    expect(onchain).toBeInstanceOf(OnchainFacilitator);
    expect(onchain).toMatchObject({ name: 'onchain', inProcess: false, relayerAddresses: [privateKeyToAccount(key).address] });
    const remote = createLiveFacilitator(
      loadConfig({ ...baseEnv, SVC_LIVE_FACILITATOR: 'remote', SVC_RPC_URL_BASE: 'http://127.0.0.1:8545', SVC_FACILITATOR_URL: 'https://x402.example.com/facilitator' }),
      silentLog(),
    );
    expect(remote).toBeInstanceOf(RemoteFacilitator);
    expect(remote).toMatchObject({ name: 'remote', inProcess: false });
    await onchain.close();
    await remote.close();
  });

  it('settleMockRail returns a fresh mock_<ulid> reference', () => {
    const a = settleMockRail().reference;
    expect(a).toMatch(/^mock_[0-9a-z]{26}$/);
    expect(settleMockRail().reference).not.toBe(a);
  });

  it('the card rail is 402 RAIL_NOT_IMPLEMENTED in the settle 402 shape', () => {
    const err = cardRailNotImplemented();
    expect(err.status).toBe(402);
    expect(err.body()).toMatchObject({ status: 'payment_invalid', reason_codes: ['RAIL_NOT_IMPLEMENTED'] });
  });
});
