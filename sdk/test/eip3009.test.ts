import { describe, expect, it } from 'vitest';
import { recoverTypedDataAddress } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { PaymentRequired } from '@svc/contract';
import { AgentClient, buildTransferAuthorization, manifestUrlFor, PaymentRequirementError, USDC_CHAINS } from '../src/index.js';

const PAY_TO = '0x1111111111111111111111111111111111111111';

function requirement(over: Partial<PaymentRequired> = {}): PaymentRequired {
  return {
    rail: 'x402',
    scheme: 'x402-exact',
    payTo: PAY_TO,
    amount: '21.00',
    currency: 'USD',
    amountBaseUnits: '21000000',
    chain: 'base-sepolia',
    chainId: 84532,
    asset: 'USDC',
    verifyingContract: USDC_CHAINS['base-sepolia'].verifyingContract,
    eip712Domain: { name: 'USDC', version: '2' },
    validUntil: 2_000_000_000,
    ...over,
  };
}

describe('buildTransferAuthorization', () => {
  const from = privateKeyToAccount(generatePrivateKey()).address;

  it('GIVEN a requirement WHEN building THEN value is exactly amountBaseUnits, to is payTo and the window is now-600..now+300', () => {
    const { typedData, authorization } = buildTransferAuthorization(requirement({ amountBaseUnits: '123456789012345678901234567890' }), from, { nowSec: 1_700_000_000 });
    expect(typedData.message.value).toBe(123456789012345678901234567890n);
    expect(authorization).toMatchObject({ from, to: PAY_TO, value: '123456789012345678901234567890', validAfter: 1_699_999_400, validBefore: 1_700_000_300 });
    expect(typedData.domain).toEqual({ name: 'USDC', version: '2', chainId: 84532, verifyingContract: USDC_CHAINS['base-sepolia'].verifyingContract });
    expect(typedData.primaryType).toBe('TransferWithAuthorization');
  });

  it('GIVEN two builds WHEN comparing nonces THEN each is 32 random bytes', () => {
    const a = buildTransferAuthorization(requirement(), from).authorization.nonce;
    const b = buildTransferAuthorization(requirement(), from).authorization.nonce;
    expect(a).toMatch(/^0x[0-9a-f]{64}$/);
    expect(a).not.toBe(b);
  });

  it('GIVEN a requirement without domain fields WHEN building THEN the chain table fills them (base: USD Coin, 8453)', () => {
    const { typedData } = buildTransferAuthorization(requirement({ chain: 'base', chainId: null, verifyingContract: null, eip712Domain: null }), from);
    expect(typedData.domain).toEqual({ name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' });
    const sepolia = buildTransferAuthorization(requirement({ chainId: null, verifyingContract: null, eip712Domain: null }), from).typedData.domain;
    expect(sepolia).toEqual({ name: 'USDC', version: '2', chainId: 84532, verifyingContract: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' });
  });

  it('GIVEN an advertised domain name WHEN building THEN it wins over the table', () => {
    expect(buildTransferAuthorization(requirement({ eip712Domain: { name: 'Custom USDC', version: '2' } }), from).typedData.domain.name).toBe('Custom USDC');
  });

  it('GIVEN a requirement that cannot be signed WHEN building THEN PaymentRequirementError', () => {
    expect(() => buildTransferAuthorization(requirement({ rail: 'card' }), from)).toThrow(PaymentRequirementError);
    expect(() => buildTransferAuthorization(requirement({ amountBaseUnits: '1.5' }), from)).toThrow(PaymentRequirementError);
    expect(() => buildTransferAuthorization(requirement({ amountBaseUnits: null }), from)).toThrow(PaymentRequirementError);
    expect(() => buildTransferAuthorization(requirement({ payTo: 'not-an-address' }), from)).toThrow(PaymentRequirementError);
    expect(() => buildTransferAuthorization(requirement({ chain: null }), from)).toThrow(PaymentRequirementError);
  });

  it('GIVEN a local account WHEN the agent signs a payment THEN the signature recovers to the payer under the requirement domain', async () => {
    const account = privateKeyToAccount(generatePrivateKey());
    const agent = new AgentClient({ account });
    const pr = requirement();
    const body = await agent.paymentFor(pr);
    if (!('authorization' in body.payment)) throw new Error('expected an x402 payment');
    const { authorization, signature } = body.payment;
    const recovered = await recoverTypedDataAddress({
      domain: { name: 'USDC', version: '2', chainId: 84532, verifyingContract: USDC_CHAINS['base-sepolia'].verifyingContract },
      types: {
        TransferWithAuthorization: [
          { name: 'from', type: 'address' },
          { name: 'to', type: 'address' },
          { name: 'value', type: 'uint256' },
          { name: 'validAfter', type: 'uint256' },
          { name: 'validBefore', type: 'uint256' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'TransferWithAuthorization',
      message: {
        from: authorization.from as `0x${string}`,
        to: authorization.to as `0x${string}`,
        value: BigInt(authorization.value),
        validAfter: BigInt(authorization.validAfter),
        validBefore: BigInt(authorization.validBefore),
        nonce: authorization.nonce as `0x${string}`,
      },
      signature: signature as `0x${string}`,
    });
    expect(recovered).toBe(account.address);
    expect(body.payment.scheme).toBe('x402-exact');
    expect(await agent.paymentFor(requirement({ rail: 'mock', scheme: 'mock' }))).toEqual({ payment: { mock: true } });
  });
});

describe('manifestUrlFor', () => {
  it('GIVEN the accepted discovery inputs WHEN resolving THEN each points at the well-known manifest', () => {
    expect(manifestUrlFor('https://shop.example.com')).toBe('https://shop.example.com/.well-known/agentic-checkout.json');
    expect(manifestUrlFor('shop.example.com')).toBe('https://shop.example.com/.well-known/agentic-checkout.json');
    expect(manifestUrlFor('coffee.svc.localhost:3000')).toBe('http://coffee.svc.localhost:3000/.well-known/agentic-checkout.json');
    expect(manifestUrlFor('https://api.example.com/m/mrch_01/')).toBe('https://api.example.com/m/mrch_01/.well-known/agentic-checkout.json');
    expect(manifestUrlFor('https://api.example.com/m/coffee?x=1')).toBe('https://api.example.com/m/coffee/.well-known/agentic-checkout.json');
    expect(manifestUrlFor('https://shop.example.com/.well-known/agentic-checkout.json')).toBe('https://shop.example.com/.well-known/agentic-checkout.json');
  });
});
