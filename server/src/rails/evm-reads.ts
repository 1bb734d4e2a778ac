import {
  BaseError,
  ContractFunctionRevertedError,
  ContractFunctionZeroDataError,
  HttpRequestError,
  RpcRequestError,
  TimeoutError,
  getAddress,
  isAddressEqual,
  formatTransactionReceipt,
  parseEventLogs,
  type Address,
  type RpcTransactionReceipt,
  type Hex,
  type PublicClient,
  type TransactionReceipt,
} from 'viem';
import { TRANSFER_WITH_AUTHORIZATION_TYPES, type ReasonCode } from '@svc/contract';
import { ApiError } from '../lib/errors.js';
import type { BroadcastRecord, PaymentProof, SettleOutcome } from './types.js';

/**
 * Chain reads shared by the onchain and remote facilitators: the USDC (FiatToken v2.2)
 * functions and events they need, authorization state, receipts, and the AuthorizationUsed and
 * AuthorizationCanceled logs.
 */
export const USDC_ABI = [
  {
    type: 'function',
    name: 'transferWithAuthorization',
    stateMutability: 'nonpayable',
    // The signed typed-data fields, then the signature split into v, r, s.
    inputs: [
      ...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization,
      { name: 'v', type: 'uint8' },
      { name: 'r', type: 'bytes32' },
      { name: 's', type: 'bytes32' },
    ],
    outputs: [],
  },
  {
    type: 'function',
    name: 'authorizationState',
    stateMutability: 'view',
    inputs: [
      { name: 'authorizer', type: 'address' },
      { name: 'nonce', type: 'bytes32' },
    ],
    outputs: [{ name: '', type: 'bool' }],
  },
  {
    type: 'function',
    name: 'balanceOf',
    stateMutability: 'view',
    inputs: [{ name: 'account', type: 'address' }],
    outputs: [{ name: '', type: 'uint256' }],
  },
  {
    type: 'event',
    name: 'Transfer',
    inputs: [
      { name: 'from', type: 'address', indexed: true },
      { name: 'to', type: 'address', indexed: true },
      { name: 'value', type: 'uint256', indexed: false },
    ],
  },
  {
    type: 'event',
    name: 'AuthorizationUsed',
    inputs: [
      { name: 'authorizer', type: 'address', indexed: true },
      { name: 'nonce', type: 'bytes32', indexed: true },
    ],
  },
  {
    // cancelAuthorization: the payer retires an unused authorization; its nonce reads as used from then on
    type: 'event',
    name: 'AuthorizationCanceled',
    inputs: [
      { name: 'authorizer', type: 'address', indexed: true },
      { name: 'nonce', type: 'bytes32', indexed: true },
    ],
  },
  {
    // FiatToken v2.2's overload for any signer: an EOA's 65 bytes or a smart wallet's ERC-1271 signature
    type: 'function',
    name: 'transferWithAuthorization',
    stateMutability: 'nonpayable',
    inputs: [...TRANSFER_WITH_AUTHORIZATION_TYPES.TransferWithAuthorization, { name: 'signature', type: 'bytes' }],
    outputs: [],
  },
] as const;

const AUTHORIZATION_USED = USDC_ABI[4];
const AUTHORIZATION_CANCELED = USDC_ABI[5];

/** True when the error says the node could not be reached or did not answer (not a revert). */
export function isRpcUnavailable(err: unknown): boolean {
  if (err instanceof ApiError) return err.codes.includes('FACILITATOR_UNAVAILABLE');
  if (!(err instanceof BaseError)) return err instanceof TypeError || (err instanceof Error && /fetch failed|ECONNREFUSED|ETIMEDOUT/i.test(err.message));
  return Boolean(err.walk((e) => e instanceof HttpRequestError || e instanceof TimeoutError));
}

/** The 503 every live facilitator throws when its chain node is unreachable (no URL in the text). */
export const rpcUnavailable = () => new ApiError('FACILITATOR_UNAVAILABLE', 'The chain node behind the live facilitator is unreachable; retry shortly.');

/**
 * What went wrong with a chain read, in one line that names the cause and never the node's URL
 * (viem's messages append it, and it may carry an API key): unreachable, a contract that
 * answered nothing (no code at the address: a fresh or wrong chain), or the node's own error.
 */
export function chainReadCause(err: unknown): string {
  if (err instanceof ApiError) return err.human;
  if (!(err instanceof BaseError)) return isRpcUnavailable(err) ? rpcUnavailable().human : 'The chain node gave an unreadable answer.';
  if (isRpcUnavailable(err)) return rpcUnavailable().human;
  const zero = err.walk((e) => e instanceof ContractFunctionZeroDataError) as ContractFunctionZeroDataError | null;
  if (zero) return `The chain node answers, but the token contract returned no data (${zero.shortMessage}): is there a contract at the USDC address on this chain?`;
  const rpc = err.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  return `The chain node answered with an error: ${(rpc?.details || err.shortMessage).slice(0, 200)}`;
}

/** Runs a read; any failure (unreachable, rate-limited, malformed answer) is 503 FACILITATOR_UNAVAILABLE naming its cause, never the raw RPC error. */
export async function chainRead<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof ApiError) throw err;
    throw new ApiError('FACILITATOR_UNAVAILABLE', chainReadCause(err));
  }
}

/** The revert reason string of a failed call or estimate, or null when it was not a revert. */
export function revertReason(err: unknown): string | null {
  if (!(err instanceof BaseError)) return null;
  const reverted = err.walk((e) => e instanceof ContractFunctionRevertedError) as ContractFunctionRevertedError | null;
  if (reverted) return reverted.reason ?? reverted.shortMessage;
  const rpc = err.walk((e) => e instanceof RpcRequestError) as RpcRequestError | null;
  if (rpc && /revert/i.test(rpc.details ?? rpc.shortMessage)) return rpc.details ?? rpc.shortMessage;
  return /revert/i.test(err.details ?? err.shortMessage) ? (err.details ?? err.shortMessage) : null;
}

/** FiatToken's revert strings to our reason codes; unknown reverts are CAPTURE_FAILED. */
export function mapRevert(reason: string): { code: ReasonCode; human: string } {
  if (/authorization is used|used or canceled/i.test(reason)) {
    return { code: 'NONCE_ALREADY_USED', human: 'The authorization nonce was already used on chain; sign a new authorization.' };
  }
  if (/authorization is expired/i.test(reason)) {
    return { code: 'PAYMENT_EXPIRED', human: 'The authorization has expired on chain (validBefore); sign a new authorization.' };
  }
  if (/not yet valid/i.test(reason)) {
    return { code: 'PAYMENT_NOT_YET_VALID', human: 'The authorization is not yet valid on chain (validAfter).' };
  }
  if (/exceeds balance|insufficient/i.test(reason)) {
    return { code: 'INSUFFICIENT_FUNDS', human: 'The payer does not hold enough USDC for this authorization.' };
  }
  if (/signature/i.test(reason)) {
    return { code: 'SIGNER_MISMATCH', human: 'The token contract refused the signature; sign the EIP-712 typed data again.' };
  }
  return { code: 'CAPTURE_FAILED', human: 'The token contract refused the transfer.' };
}

/** authorizationState(from, nonce), at `blockNumber` when given (a snapshot shared with other reads), else at the latest block. */
export function authorizationUsed(client: PublicClient, token: Address, proof: PaymentProof, blockNumber?: bigint): Promise<boolean> {
  return chainRead(() =>
    client.readContract({
      address: token,
      abi: USDC_ABI,
      functionName: 'authorizationState',
      args: [getAddress(proof.authorization.from), proof.authorization.nonce as Hex],
      ...(blockNumber === undefined ? {} : { blockNumber }),
    }),
  );
}

/**
 * One block to judge an authorization at: whether it was used and whether it had expired must
 * be read at the same block. Read at different moments, a transfer mined in between would
 * look both unused (first read) and expired (second read), and be released though it moved.
 */
export type ChainSnapshot = { number: bigint; timeSec: number };
export async function chainSnapshot(client: PublicClient): Promise<ChainSnapshot> {
  const block = await chainRead(() => client.getBlock({ blockTag: 'latest' }));
  return { number: block.number, timeSec: Number(block.timestamp) };
}

/**
 * The authorization judged at one block: used (the transfer happened), expired unused (it can
 * never happen: FiatToken refuses it after validBefore), or open.
 */
export async function authorizationAt(client: PublicClient, token: Address, proof: PaymentProof, at: ChainSnapshot): Promise<'used' | 'expired' | 'open'> {
  if (await authorizationUsed(client, token, proof, at.number)) return 'used';
  return at.timeSec >= proof.authorization.validBefore ? 'expired' : 'open';
}

export function usdcBalance(client: PublicClient, token: Address, owner: string): Promise<bigint> {
  return chainRead(() => client.readContract({ address: token, abi: USDC_ABI, functionName: 'balanceOf', args: [getAddress(owner)] }));
}

/** usdcBalance, answered within `timeoutMs` or 503 FACILITATOR_UNAVAILABLE (a dashboard read never waits on the transport's own longer timeout). */
export async function usdcBalanceWithin(client: PublicClient, token: Address, owner: string, timeoutMs: number): Promise<bigint> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new ApiError('FACILITATOR_UNAVAILABLE', `The chain node did not answer within ${timeoutMs} ms; retry shortly.`)), timeoutMs);
  });
  try {
    return await Promise.race([usdcBalance(client, token, owner), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** The receipt, or null while the node does not know the transaction as mined. */
export async function receiptOf(client: PublicClient, hash: Hex): Promise<TransactionReceipt | null> {
  // The raw call answers null for "not mined yet": viem's getTransactionReceipt throws an error
  // object for it, which costs more than the read on automine's frequent early looks.
  let raw: RpcTransactionReceipt | null;
  try {
    raw = await client.request({ method: 'eth_getTransactionReceipt', params: [hash] });
  } catch {
    throw rpcUnavailable();
  }
  return raw ? formatTransactionReceipt(raw) : null;
}

/**
 * Whether a mined receipt carries this authorization's transfer exactly as signed: the token's
 * `AuthorizationUsed(from, nonce)` log and, right after it, its `Transfer(from, to, value)`.
 * FiatToken's transferWithAuthorization emits those two and nothing between them, so the pair
 * ties the nonce to the transfer: a transaction that used this nonce for another payment of the
 * payer's and also moved `value` to this merchant on another authorization (a batch of
 * several) does not count for this one.
 */
export function receiptMovesFunds(receipt: TransactionReceipt, token: Address, proof: PaymentProof): boolean {
  if (receipt.status !== 'success') return false;
  const a = proof.authorization;
  const from = getAddress(a.from);
  const logs = parseEventLogs({ abi: USDC_ABI, logs: receipt.logs.filter((l) => isAddressEqual(l.address, token)) });
  return logs.some((used, i) => {
    if (used.eventName !== 'AuthorizationUsed' || !isAddressEqual(used.args.authorizer, from) || used.args.nonce.toLowerCase() !== a.nonce.toLowerCase()) return false;
    const next = logs[i + 1];
    return (
      next?.eventName === 'Transfer' &&
      next.logIndex === used.logIndex + 1 &&
      isAddressEqual(next.args.from, from) &&
      isAddressEqual(next.args.to, getAddress(a.to)) &&
      next.args.value === BigInt(a.value)
    );
  });
}

/**
 * Why the authorization's nonce read as used at block `at` (`authorizationAt`), from its logs in
 * the `lookbackBlocks` up to that block: a transaction that used it (AuthorizationUsed: the
 * transfer happened), or the payer's cancelAuthorization (AuthorizationCanceled: FiatToken marks
 * the nonce used and nothing moves). Null when neither is in the window. A nonce is used or
 * canceled once, never both. The window ends at the judged block, not at a block number read
 * again (viem caches `getBlockNumber` for up to 4 s, which missed a log in the newest block).
 */
export async function authorizationUseOf(
  client: PublicClient,
  token: Address,
  proof: PaymentProof,
  lookbackBlocks: bigint,
  at: ChainSnapshot,
): Promise<{ by: 'transfer' | 'cancel'; tx: Hex } | null> {
  return chainRead(async () => {
    const window = {
      address: token,
      args: { authorizer: getAddress(proof.authorization.from), nonce: proof.authorization.nonce as Hex },
      fromBlock: at.number > lookbackBlocks ? at.number - lookbackBlocks : 0n,
      toBlock: at.number,
    };
    const [used, canceled] = await Promise.all([
      client.getLogs({ ...window, event: AUTHORIZATION_USED }),
      client.getLogs({ ...window, event: AUTHORIZATION_CANCELED }),
    ]);
    const usedTx = used.at(-1)?.transactionHash;
    if (usedTx) return { by: 'transfer' as const, tx: usedTx };
    const cancelTx = canceled.at(-1)?.transactionHash;
    return cancelTx ? { by: 'cancel' as const, tx: cancelTx } : null;
  });
}

/**
 * The authorization reads as used on chain; what that means for the attempt. Settled only on
 * evidence that the funds moved: a recorded transaction whose receipt moves them, else the
 * transaction named by the AuthorizationUsed log when its receipt moves them too (someone
 * else's transaction may have carried our authorization). The nonce, not the authorization, is
 * what FiatToken marks used, so a payer can spoil it ahead of our transaction (which then
 * reverts) by canceling it (cancelAuthorization) or by spending it on another authorization of
 * theirs; either way nothing was paid: failed, NONCE_ALREADY_USED. With neither log in the
 * window the outcome stays pending, never settled on a guess: an order is fulfilled only for
 * funds that moved.
 */
export async function usedAuthorizationOutcome(
  client: PublicClient,
  token: Address,
  proof: PaymentProof,
  recordedHashes: Hex[],
  lookbackBlocks: bigint,
  /** The block at which `authorizationAt` answered used. */
  at: ChainSnapshot,
): Promise<SettleOutcome> {
  for (const hash of recordedHashes) {
    const r = await receiptOf(client, hash);
    if (r && receiptMovesFunds(r, token, proof)) return { status: 'settled', reference: hash };
  }
  const use = await authorizationUseOf(client, token, proof, lookbackBlocks, at);
  if (use?.by === 'transfer') {
    // Our authorization carried by someone else's transaction moves exactly these funds. The
    // payer can also spend the same nonce on another authorization of theirs (to another
    // address, or another value): the nonce is used, but this payment did not happen.
    const r = await receiptOf(client, use.tx);
    if (r && receiptMovesFunds(r, token, proof)) return { status: 'settled', reference: use.tx };
    return {
      status: 'failed',
      code: 'NONCE_ALREADY_USED',
      human: `The authorization's nonce was spent on chain by another authorization of the payer (transaction ${use.tx}), not by this one's transfer of ${proof.authorization.value} base units to ${getAddress(proof.authorization.to)}; this payment did not happen. Sign a new authorization.`,
    };
  }
  if (use?.by === 'cancel') {
    return {
      status: 'failed',
      code: 'NONCE_ALREADY_USED',
      human: `The payer canceled this authorization on chain (cancelAuthorization, transaction ${use.tx}) before any transfer carried it; no USDC moved. Sign a new authorization.`,
    };
  }
  return { status: 'pending', reference: recordedHashes.at(-1) ?? null };
}

/** Recorded hashes, oldest first. */
export const hashesOf = (broadcasts: BroadcastRecord[]): Hex[] => broadcasts.map((b) => b.txHash);

/**
 * The simulation before our broadcast reverted "authorization is used or canceled": nothing of
 * ours was sent, and the nonce is used on chain. Was this authorization executed exactly as
 * signed by someone else's transaction (anyone may carry a signed transferWithAuthorization)?
 * Then the merchant is paid: settled with that transaction. A spoiled nonce (canceled, or spent
 * on another authorization of the payer's) fails NONCE_ALREADY_USED naming the spoiler, and so
 * does a use no log in the window explains (nothing of ours can be in flight to wait for).
 */
export async function judgeUsedBeforeUs(
  client: PublicClient,
  token: Address,
  proof: PaymentProof,
  lookbackBlocks: bigint,
): Promise<Exclude<SettleOutcome, { status: 'pending' }>> {
  const at = await chainSnapshot(client);
  const unexplained = { status: 'failed' as const, ...mapRevert('authorization is used or canceled') };
  if ((await authorizationAt(client, token, proof, at)) !== 'used') return unexplained;
  const outcome = await usedAuthorizationOutcome(client, token, proof, [], lookbackBlocks, at);
  return outcome.status === 'pending' ? unexplained : outcome;
}

/** One authorization exactly as presented (every signed field and the signature), as a map key. */
export const authorizationKey = (p: PaymentProof): string => {
  const a = p.authorization;
  return [p.chain, a.from, a.to, a.value, a.validAfter, a.validBefore, a.nonce, p.signature].join('|').toLowerCase();
};

/**
 * Authorizations verify() found executed on chain as signed (judgeUsedBeforeUs), for the settle
 * of the same authorization that follows it: that settle answers settled with the transaction
 * found, without another simulation or a request that can only fail. An executed authorization
 * stays executed, so a remembered one never goes stale; entries are dropped after a minute
 * (measured with Date.now(): elapsed time, not the application's clock) to bound the map.
 */
export class ExecutedAuthorizations {
  private readonly seen = new Map<string, { reference: string; at: number }>();
  private static readonly KEEP_MS = 60_000;

  remember(p: PaymentProof, reference: string): void {
    const now = Date.now();
    for (const [k, e] of this.seen) if (now - e.at >= ExecutedAuthorizations.KEEP_MS) this.seen.delete(k);
    this.seen.set(authorizationKey(p), { reference, at: now });
  }

  /** The transaction that carried this authorization, once (the entry is removed). */
  take(p: PaymentProof): string | null {
    const key = authorizationKey(p);
    const e = this.seen.get(key);
    if (!e) return null;
    this.seen.delete(key);
    return e.reference;
  }
}
