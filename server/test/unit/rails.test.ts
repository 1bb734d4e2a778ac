import { randomBytes } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { encodeAbiParameters, keccak256, toHex, type Address, type Hex } from 'viem';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/lib/errors.js';
import { transferTypedData, type Authorization } from '../../src/modules/gate/eip712.js';
import {
  cardRailNotImplemented,
  facilitatorFor,
  MockFacilitator,
  settleMockRail,
  UnconfiguredLiveFacilitator,
  type SettleRequest,
} from '../../src/rails/index.js';

const NOW = 1_760_000_000;
const payer = privateKeyToAccount(generatePrivateKey());
const payTo = privateKeyToAccount(generatePrivateKey()).address;

async function request(over: Partial<Authorization> = {}): Promise<SettleRequest> {
  const authorization: Authorization = {
    from: payer.address,
    to: payTo,
    value: '1500000',
    validAfter: NOW - 600,
    validBefore: NOW + 300,
    nonce: toHex(randomBytes(32)),
    ...over,
  };
  const signature = await payer.signTypedData(transferTypedData('base-sepolia', authorization));
  return { chain: 'base-sepolia', payTo, amountBaseUnits: '1500000', authorization, signature, nowSec: NOW };
}

describe('MockFacilitator', () => {
  it('GIVEN a valid authorization THEN verify and settle succeed with the same 0x + 64 hex reference', async () => {
    const f = new MockFacilitator();
    const req = await request();
    const v = await f.verify(req);
    const s = await f.settle(req);
    expect(s).toEqual(v);
    expect(s.ok).toBe(true);
    if (!s.ok) return;
    expect(s.chain).toBe('base-sepolia');
    expect(s.reference).toMatch(/^0x[0-9a-f]{64}$/);
    const a = req.authorization;
    const expected = keccak256(
      encodeAbiParameters(
        [{ type: 'uint256' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }],
        [84532n, a.from as Address, a.to as Address, 1500000n, a.nonce as Hex],
      ),
    );
    expect(s.reference).toBe(expected);
  });

  it('the reference is deterministic across instances and differs per nonce', async () => {
    const req = await request();
    const r1 = await new MockFacilitator().settle(req);
    const r2 = await new MockFacilitator().settle({ ...req, nowSec: NOW + 10 });
    const other = await new MockFacilitator().settle(await request());
    expect(r1.ok && r2.ok && other.ok).toBe(true);
    if (!r1.ok || !r2.ok || !other.ok) return;
    expect(r2.reference).toBe(r1.reference);
    expect(other.reference).not.toBe(r1.reference);
  });

  it('GIVEN a chain other than base-sepolia THEN refused before anything else', async () => {
    const req = await request();
    const r = await new MockFacilitator().settle({ ...req, chain: 'base' });
    expect(r).toMatchObject({ ok: false, code: 'PAYMENT_SCHEME_UNSUPPORTED' });
  });

  it('runs the off-chain checks (a bad signature is SIGNER_MISMATCH)', async () => {
    const req = await request();
    const forged = await privateKeyToAccount(generatePrivateKey()).signTypedData(transferTypedData('base-sepolia', req.authorization));
    expect(await new MockFacilitator().settle({ ...req, signature: forged })).toMatchObject({ ok: false, code: 'SIGNER_MISMATCH' });
    expect(await new MockFacilitator().settle({ ...req, amountBaseUnits: '1500001' })).toMatchObject({ ok: false, code: 'PAYMENT_AMOUNT_MISMATCH' });
  });

  it('GIVEN a payer balance below the value THEN INSUFFICIENT_FUNDS; enough or unlisted passes', async () => {
    const req = await request();
    const poor = new MockFacilitator({ balances: { [payer.address.toLowerCase()]: 1_499_999n } });
    expect(await poor.verify(req)).toMatchObject({ ok: false, code: 'INSUFFICIENT_FUNDS' });
    expect(await poor.settle(req)).toMatchObject({ ok: false, code: 'INSUFFICIENT_FUNDS' });
    const exact = new MockFacilitator({ balances: { [payer.address]: 1_500_000n } });
    expect(await exact.settle(req)).toMatchObject({ ok: true });
    const others = new MockFacilitator({ balances: { [payTo]: 0n } });
    expect(await others.settle(req)).toMatchObject({ ok: true });
  });
});

describe('live facilitator and rail helpers', () => {
  it('the unconfigured live facilitator throws FACILITATOR_UNAVAILABLE (503) on verify and settle', async () => {
    const live = new UnconfiguredLiveFacilitator();
    const req = await request();
    for (const call of [() => live.verify(req), () => live.settle(req)]) {
      const err = await call().then(
        () => null,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(ApiError);
      expect((err as ApiError).codes).toEqual(['FACILITATOR_UNAVAILABLE']);
      expect((err as ApiError).status).toBe(503);
    }
  });

  it('facilitatorFor: test mode is one shared mock, live mode never the mock', () => {
    expect(facilitatorFor(false)).toBeInstanceOf(MockFacilitator);
    expect(facilitatorFor(false)).toBe(facilitatorFor(false));
    expect(facilitatorFor(true)).toBeInstanceOf(UnconfiguredLiveFacilitator);
    expect(facilitatorFor(true)).not.toBeInstanceOf(MockFacilitator);
  });

  it('settleMockRail returns a fresh mock_<ulid> reference', () => {
    const a = settleMockRail().reference;
    const b = settleMockRail().reference;
    expect(a).toMatch(/^mock_[0-9a-z]{26}$/);
    expect(b).not.toBe(a);
  });

  it('the card rail is 402 RAIL_NOT_IMPLEMENTED in the settle 402 shape', () => {
    const err = cardRailNotImplemented();
    expect(err.status).toBe(402);
    expect(err.body()).toMatchObject({ status: 'payment_invalid', reason_codes: ['RAIL_NOT_IMPLEMENTED'] });
  });
});
