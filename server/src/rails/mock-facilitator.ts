import { encodeAbiParameters, keccak256, type Address, type Hex } from 'viem';
import { checkAuthorization } from '../modules/gate/eip712.js';
import { CHAINS, type ChainName } from '../modules/receiving/validate.js';
import type { Facilitator, FacilitatorResult, SettleRequest } from './types.js';

/** The only chain test mode settles on. */
export const MOCK_CHAIN: ChainName = 'base-sepolia';

export type MockFacilitatorOptions = {
  /** Payer balances in base units; an address absent from the map has unlimited funds. */
  balances?: Record<string, bigint>;
};

/**
 * Test-mode x402 facilitator (decisions.md "Rails and facilitators"): checks everything a real
 * facilitator checks off-chain, including signer recovery under the base-sepolia domain, moves
 * no funds and returns a deterministic 32-byte reference. It keeps no state: nonce reuse is
 * refused by the gate's unique constraint on (payer, nonce), as it would be on-chain.
 */
export class MockFacilitator implements Facilitator {
  readonly name = 'mock';
  private readonly balances: Map<string, bigint>;

  constructor(opts: MockFacilitatorOptions = {}) {
    this.balances = new Map(Object.entries(opts.balances ?? {}).map(([addr, v]) => [addr.toLowerCase(), v]));
  }

  async verify(req: SettleRequest): Promise<FacilitatorResult> {
    if (req.chain !== MOCK_CHAIN) {
      return {
        ok: false,
        code: 'PAYMENT_SCHEME_UNSUPPORTED',
        human: `The test-mode facilitator settles only on ${MOCK_CHAIN}, not ${String(req.chain)}.`,
      };
    }
    const check = await checkAuthorization({
      chain: req.chain,
      payTo: req.payTo,
      amountBaseUnits: req.amountBaseUnits,
      auth: req.authorization,
      signature: req.signature,
      nowSec: req.nowSec,
    });
    if (!check.ok) return check;
    const balance = this.balances.get(req.authorization.from.toLowerCase());
    if (balance !== undefined && balance < BigInt(req.authorization.value)) {
      return {
        ok: false,
        code: 'INSUFFICIENT_FUNDS',
        human: `The payer ${req.authorization.from} holds ${balance} base units of USDC, less than ${req.authorization.value}.`,
      };
    }
    return { ok: true, reference: mockReference(req), chain: req.chain };
  }

  async settle(req: SettleRequest): Promise<FacilitatorResult> {
    return this.verify(req);
  }
}

/** keccak256(abi.encode(chainId, from, to, value, nonce)): the same authorization always maps to the same reference. */
export function mockReference(req: SettleRequest): Hex {
  const a = req.authorization;
  return keccak256(
    encodeAbiParameters(
      [{ type: 'uint256' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }],
      [BigInt(CHAINS[req.chain].chainId), a.from.toLowerCase() as Address, a.to.toLowerCase() as Address, BigInt(a.value), a.nonce as Hex],
    ),
  );
}
