import { encodeAbiParameters, keccak256, type Address, type Hex } from 'viem';
import { CHAINS, type ChainName } from '@svc/contract';
import { checkProof, type Signers } from '../lib/eip3009.js';
import type { Facilitator, FacilitatorHealth, PaymentProof, ReconcileInput, SettleOutcome, VerifyResult } from './types.js';

/** The only chain test mode settles on. */
export const MOCK_CHAIN: ChainName = 'base-sepolia';

export type MockFacilitatorOptions = {
  /** Payer balances in base units; an address absent from the map has unlimited funds. */
  balances?: Record<string, bigint>;
  /** Signer recovery (services.signers); on the calling thread when absent. */
  signers?: Signers;
};

/**
 * Test-mode x402 facilitator (decisions.md "Rails and facilitators"): checks everything a real
 * facilitator checks off-chain, including signer recovery under the base-sepolia domain, moves
 * no funds and returns a deterministic 32-byte reference. It keeps no state: nonce reuse is
 * refused by the gate's unique constraint on (payer, nonce), as it would be on-chain.
 * It talks to nothing outside the process, so the engine settles it inside one transaction.
 */
export class MockFacilitator implements Facilitator {
  readonly name = 'mock';
  readonly inProcess = true;
  private readonly balances: Map<string, bigint>;
  private readonly signers: Signers | undefined;

  constructor(opts: MockFacilitatorOptions = {}) {
    this.signers = opts.signers;
    this.balances = new Map(Object.entries(opts.balances ?? {}).map(([addr, v]) => [addr.toLowerCase(), v]));
  }

  async verify(proof: PaymentProof, nowSec: number): Promise<VerifyResult> {
    if (proof.chain !== MOCK_CHAIN) {
      return {
        ok: false,
        code: 'PAYMENT_SCHEME_UNSUPPORTED',
        human: `The test-mode facilitator settles only on ${MOCK_CHAIN}, not ${String(proof.chain)}.`,
      };
    }
    const check = await checkProof(proof, nowSec, this.signers);
    if (!check.ok) return check;
    const balance = this.balances.get(proof.authorization.from.toLowerCase());
    if (balance !== undefined && balance < BigInt(proof.authorization.value)) {
      return {
        ok: false,
        code: 'INSUFFICIENT_FUNDS',
        human: `The payer ${proof.authorization.from} holds ${balance} base units of USDC, less than ${proof.authorization.value}.`,
      };
    }
    return check;
  }

  /** Verify again (the proof may have aged) and "mine" it: the reference is deterministic. */
  async settle(proof: PaymentProof, opts: { nowSec: number }): Promise<SettleOutcome> {
    const v = await this.verify(proof, opts.nowSec);
    if (!v.ok) return { status: 'failed', code: v.code, human: v.human };
    return { status: 'settled', reference: mockReference(v.proof) };
  }

  /** Nothing is ever left in flight by the mock; an unresolved attempt simply settles. */
  async reconcile(input: ReconcileInput): Promise<SettleOutcome> {
    return { status: 'settled', reference: mockReference(input.proof) };
  }

  async health(): Promise<FacilitatorHealth> {
    return { ok: true, detail: { facilitator: 'mock', chain: MOCK_CHAIN } };
  }

  async close(): Promise<void> {}
}

/** keccak256(abi.encode(chainId, from, to, value, nonce)): the same authorization always maps to the same reference. */
export function mockReference(proof: Pick<PaymentProof, 'chain' | 'authorization'>): Hex {
  const a = proof.authorization;
  return keccak256(
    encodeAbiParameters(
      [{ type: 'uint256' }, { type: 'address' }, { type: 'address' }, { type: 'uint256' }, { type: 'bytes32' }],
      [BigInt(CHAINS[proof.chain].chainId), a.from.toLowerCase() as Address, a.to.toLowerCase() as Address, BigInt(a.value), a.nonce as Hex],
    ),
  );
}
