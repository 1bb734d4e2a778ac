import { createPublicClient, encodeAbiParameters, http, keccak256, type Address, type Hex, type PublicClient } from 'viem';
import { baseSepolia } from 'viem/chains';
import { CHAINS, type ChainName } from '@svc/contract';
import { checkProof, transferTypedData, type Signers } from '../lib/eip3009.js';
import { ApiError } from '../lib/errors.js';
import { contractCandidate } from './contract-wallets.js';
import { chainRead } from './evm-reads.js';
import type { Facilitator, FacilitatorHealth, PaymentProof, ReconcileInput, Refusal, SettleOutcome, VerifyResult } from './types.js';

/** The only chain test mode settles on. */
export const MOCK_CHAIN: ChainName = 'base-sepolia';

export type MockFacilitatorOptions = {
  /** Payer balances in base units; an address absent from the map has unlimited funds. */
  balances?: Record<string, bigint>;
  /** Signer recovery (services.signers); on the calling thread when absent. */
  signers?: Signers;
  /**
   * Test mode's chain (SVC_RPC_URL_BASE_SEPOLIA): smart-contract wallets' signatures (EIP-1271,
   * ERC-6492) are checked on it. Without one they are refused (CONTRACT_SIGNATURE_UNVERIFIABLE):
   * test mode accepts only what live mode would settle.
   */
  rpcUrl?: string;
  /** Factories an ERC-6492 signature may deploy the payer's wallet through (SVC_ERC6492_FACTORIES, lower-case). */
  erc6492Factories?: readonly string[];
};

/**
 * Test-mode x402 facilitator (decisions.md "Rails and facilitators"): checks everything a real
 * facilitator checks off-chain, including signer recovery under the base-sepolia domain, moves
 * no funds and returns a deterministic 32-byte reference. It keeps no state: nonce reuse is
 * refused by the gate's unique constraint on (payer, nonce), as it would be on-chain.
 * Without a test chain it talks to nothing outside the process, so the engine settles it inside
 * one transaction; with one (a smart wallet's signature is checked there) it is settled like a
 * live facilitator, its chain reads outside any transaction.
 */
export class MockFacilitator implements Facilitator {
  readonly name = 'mock';
  readonly inProcess: boolean;
  private readonly balances: Map<string, bigint>;
  private readonly signers: Signers | undefined;
  private readonly factories: readonly string[];
  private readonly client: PublicClient | null;
  /** The test chain's id, checked once (a failed check is asked again). */
  private chainChecked: Promise<void> | null = null;

  constructor(opts: MockFacilitatorOptions = {}) {
    this.signers = opts.signers;
    this.balances = new Map(Object.entries(opts.balances ?? {}).map(([addr, v]) => [addr.toLowerCase(), v]));
    this.factories = opts.erc6492Factories ?? [];
    this.client = opts.rpcUrl ? (createPublicClient({ chain: baseSepolia, transport: http(opts.rpcUrl, { timeout: 10_000, retryCount: 1 }) }) as PublicClient) : null;
    this.inProcess = this.client === null;
  }

  async verify(proof: PaymentProof, nowSec: number): Promise<VerifyResult> {
    if (proof.chain !== MOCK_CHAIN) {
      return {
        ok: false,
        code: 'PAYMENT_SCHEME_UNSUPPORTED',
        human: `The test-mode facilitator settles only on ${MOCK_CHAIN}, not ${String(proof.chain)}.`,
      };
    }
    const checked = await checkProof(proof, nowSec, this.signers);
    const check = checked.ok ? checked : await this.contractWallet(checked);
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
    return { ok: true, detail: { facilitator: 'mock', chain: MOCK_CHAIN, contract_wallets: this.client ? 'checked on the test chain' : 'refused (no test chain)' } };
  }

  /**
   * A signature that is not `from`'s ECDSA one, judged as a smart wallet's by the token's rule:
   * ERC-1271 isValidSignature on the TransferWithAuthorization digest, an ERC-6492 wallet
   * deployed (in the simulation) through an allowed factory first. viem's verifyTypedData on the
   * test chain does exactly that. Without a chain: a 65-byte signature stays SIGNER_MISMATCH (a
   * wrong key, most often), anything else is CONTRACT_SIGNATURE_UNVERIFIABLE.
   */
  private async contractWallet(check: Refusal & { contract?: PaymentProof }): Promise<VerifyResult> {
    const wallet = contractCandidate(check, this.factories);
    if (!wallet.ok) return wallet;
    const p = wallet.proof;
    if (!this.client) {
      if (!wallet.sig.deploy && p.signature.length === 132) {
        return { ok: false, code: check.code, human: `${check.human} (A smart-contract wallet's signature is checked only on a test chain: SVC_RPC_URL_BASE_SEPOLIA.)` };
      }
      return {
        ok: false,
        code: 'CONTRACT_SIGNATURE_UNVERIFIABLE',
        human: `The signature is not an EOA's ECDSA signature by ${p.authorization.from}: a smart-contract wallet's (EIP-1271 / ERC-6492), which this test-mode server cannot check without a test chain (SVC_RPC_URL_BASE_SEPOLIA). Pay from an EOA, or in live mode.`,
      };
    }
    await this.checkChain(this.client);
    const client = this.client;
    const valid = await chainRead(() => client.verifyTypedData({ address: p.authorization.from as Address, signature: p.signature, ...transferTypedData(MOCK_CHAIN, p.authorization) }));
    if (!valid) {
      return {
        ok: false,
        code: 'SIGNER_MISMATCH',
        human: `${p.authorization.from} did not accept the signature: its wallet's ERC-1271 isValidSignature refused the TransferWithAuthorization digest (domain {name: "${CHAINS[MOCK_CHAIN].domainName}", version: "${CHAINS[MOCK_CHAIN].domainVersion}"} on ${MOCK_CHAIN}), or it is an EOA whose key did not sign it.`,
      };
    }
    return { ok: true, proof: p };
  }

  /** The test chain must be Base Sepolia: a wallet's signature may bind the chain id. */
  private checkChain(client: PublicClient): Promise<void> {
    this.chainChecked ??= chainRead(() => client.getChainId()).then((id) => {
      if (id !== CHAINS[MOCK_CHAIN].chainId) {
        throw new ApiError('FACILITATOR_UNAVAILABLE', `SVC_RPC_URL_BASE_SEPOLIA serves chain ${id}, not ${MOCK_CHAIN} (${CHAINS[MOCK_CHAIN].chainId}).`);
      }
    });
    const checked = this.chainChecked;
    checked.catch(() => {
      if (this.chainChecked === checked) this.chainChecked = null;
    });
    return checked;
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
