import { decodeErrorResult, decodeFunctionResult, encodeFunctionData, getAddress, isErc6492Signature, parseErc6492Signature, type Address, type Hex, type PublicClient } from 'viem';
import { chainRead, isRpcUnavailable, mapRevert, revertReason, rpcUnavailable, USDC_ABI } from './evm-reads.js';
import type { PaymentProof, Refusal } from './types.js';

/**
 * Smart-contract wallets as payers (docs/settlement.md "Smart-contract wallets"): a signature
 * that is not an ECDSA signature by `from` is judged by the token's own rule, FiatToken v2.2's
 * SignatureChecker (ERC-1271 isValidSignature on the TransferWithAuthorization digest when `from`
 * has code), by simulating the token's `transferWithAuthorization(..., bytes signature)`.
 * An ERC-6492-wrapped signature of an undeployed wallet is deployed through its factory, which
 * must be allowlisted (SVC_ERC6492_FACTORIES), in the same transaction as the transfer (Multicall3).
 */

/** Multicall3, at the same address on Base, Base Sepolia and most EVM chains. */
export const MULTICALL3: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';
const MULTICALL3_ABI = [
  {
    type: 'function',
    name: 'tryAggregate',
    stateMutability: 'payable',
    inputs: [
      { name: 'requireSuccess', type: 'bool' },
      {
        name: 'calls',
        type: 'tuple[]',
        components: [
          { name: 'target', type: 'address' },
          { name: 'callData', type: 'bytes' },
        ],
      },
    ],
    outputs: [
      {
        name: 'returnData',
        type: 'tuple[]',
        components: [
          { name: 'success', type: 'bool' },
          { name: 'returnData', type: 'bytes' },
        ],
      },
    ],
  },
] as const;

/** The wallet's deployment an ERC-6492 signature carries: its factory and the factory's calldata. */
export type WalletDeployment = { factory: Address; data: Hex };

/** A contract signature taken apart: what the wallet's isValidSignature gets, and its deployment if ERC-6492-wrapped. */
export type ContractSignature = { inner: Hex; deploy: WalletDeployment | null };

/** The ERC-6492 wrapper (viem's parser) opened, its factory checked against the allowlist (lower-cased addresses). */
export function contractSignatureOf(signature: Hex, factories: readonly string[]): { ok: true; sig: ContractSignature } | Refusal {
  if (!isErc6492Signature(signature)) return { ok: true, sig: { inner: signature, deploy: null } };
  const { address, data, signature: inner } = parseErc6492Signature(signature);
  if (!address || !data) return { ok: true, sig: { inner, deploy: null } };
  if (!factories.includes(address.toLowerCase())) {
    return {
      ok: false,
      code: 'ERC6492_FACTORY_NOT_ALLOWED',
      human: `The ERC-6492 signature deploys the payer's wallet through factory ${getAddress(address)}, which this service does not allow (SVC_ERC6492_FACTORIES); deploy the wallet first, or use an allowed factory.`,
    };
  }
  return { ok: true, sig: { inner, deploy: { factory: getAddress(address), data } } };
}

/** transferWithAuthorization(from, to, value, validAfter, validBefore, nonce, bytes signature): FiatToken v2.2's overload for any signer. */
export function contractTransferCalldata(p: PaymentProof, signature: Hex): Hex {
  const a = p.authorization;
  return encodeFunctionData({
    abi: USDC_ABI,
    functionName: 'transferWithAuthorization',
    args: [getAddress(a.from), getAddress(a.to), BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as Hex, signature],
  });
}

/** What to send: the transfer to the token, or, for a wallet still to deploy, Multicall3 running the factory then the transfer. */
export function contractTransaction(token: Address, transfer: Hex, deploy: WalletDeployment | null, requireSuccess = true): { to: Address; data: Hex } {
  if (!deploy) return { to: token, data: transfer };
  return {
    to: MULTICALL3,
    data: encodeFunctionData({
      abi: MULTICALL3_ABI,
      functionName: 'tryAggregate',
      args: [
        requireSuccess,
        [
          { target: deploy.factory, callData: deploy.data },
          { target: token, callData: transfer },
        ],
      ],
    }),
  };
}

/** Whether `address` holds code (a deployed wallet); a deployed wallet's ERC-6492 wrapper is ignored (ERC-6492). */
export async function hasCode(client: PublicClient, address: string): Promise<boolean> {
  const code = await chainRead(() => client.getCode({ address: getAddress(address) }));
  return code !== undefined && code !== '0x';
}

/**
 * The deployment and the transfer simulated together (eth_call of Multicall3's tryAggregate
 * without requireSuccess): null when the transfer would succeed, else the token's refusal
 * mapped to our codes (a factory that reverts is CAPTURE_FAILED).
 */
export async function simulateDeployAndTransfer(client: PublicClient, from: Address, token: Address, transfer: Hex, deploy: WalletDeployment): Promise<Refusal | null> {
  const tx = contractTransaction(token, transfer, deploy, false);
  let out: Hex | undefined;
  try {
    ({ data: out } = await client.call({ account: from, to: tx.to, data: tx.data }));
  } catch (err) {
    if (isRpcUnavailable(err)) throw rpcUnavailable();
    const reason = revertReason(err);
    return { ok: false, ...(reason ? mapRevert(reason) : { code: 'CAPTURE_FAILED', human: 'The wallet deployment and transfer could not be simulated on chain.' }) };
  }
  let results: readonly { success: boolean; returnData: Hex }[];
  try {
    results = decodeFunctionResult({ abi: MULTICALL3_ABI, functionName: 'tryAggregate', data: out ?? '0x' });
  } catch {
    return { ok: false, code: 'CAPTURE_FAILED', human: `Multicall3 (${MULTICALL3}) did not answer on this chain: an undeployed wallet cannot be deployed and paid from.` };
  }
  const [deployed, transferred] = results;
  if (!deployed?.success) return { ok: false, code: 'CAPTURE_FAILED', human: `The wallet's ERC-6492 factory ${deploy.factory} reverted deploying it.` };
  if (transferred?.success) return null;
  let reason: string | null = null;
  try {
    const decoded = decodeErrorResult({ data: transferred?.returnData ?? '0x' });
    reason = typeof decoded.args?.[0] === 'string' ? decoded.args[0] : decoded.errorName;
  } catch {
    reason = null;
  }
  return { ok: false, ...(reason ? mapRevert(reason) : { code: 'CAPTURE_FAILED', human: 'The token contract refused the transfer.' }) };
}

/**
 * A proof checkProof refused with `contract` (every check passed but an ECDSA signer) taken as a
 * smart wallet's: the canonical proof, its signature opened. Any other refusal stands.
 */
export function contractCandidate(
  check: Refusal & { contract?: PaymentProof },
  factories: readonly string[],
): { ok: true; proof: PaymentProof; sig: ContractSignature } | Refusal {
  const { contract, ...refusal } = check;
  if (!contract) return refusal;
  const sig = contractSignatureOf(contract.signature, factories);
  return sig.ok ? { ok: true, proof: contract, sig: sig.sig } : sig;
}
