import type { Hex } from 'viem';
import type { ChainName, ReasonCode } from '@svc/contract';
import type { Authorization } from '../lib/eip3009.js';

/**
 * A transport-neutral proof of payment: the session's requirement (chain, payTo, amount) and
 * the payer's signed EIP-3009 authorization. The JSON settle route, hold approval and the x402
 * HTTP transport all build one of these. After `verify` it is canonical: addresses EIP-55
 * checksummed, the signature with v = 27/28 and low s (what USDC accepts on chain).
 */
export type PaymentProof = {
  chain: ChainName;
  payTo: string;
  amountBaseUnits: string;
  authorization: Authorization;
  signature: Hex;
};

export type Refusal = { ok: false; code: ReasonCode; human: string };

/** `proof` is the canonical form of the proof that was verified; settle that one. */
export type VerifyResult = { ok: true; proof: PaymentProof } | Refusal;

/**
 * One transaction that carries an authorization. The settlement engine stores it (awaited)
 * before the facilitator sends it, so after a crash the reconciler knows every transaction
 * that may land. `rawTx` is the signed transaction when we broadcast it ourselves (the
 * reconciler may re-send exactly those bytes; it never signs a new one).
 */
export type BroadcastRecord = {
  txHash: Hex;
  rawTx: Hex | null;
  relayer: string | null;
  relayerNonce: number | null;
};

export type SettleOptions = {
  nowSec: number;
  /** Bound on the whole call: past it the outcome is `pending` with what was broadcast. */
  waitMs: number;
  /** Awaited before each transaction is sent (the first broadcast and every replacement). */
  recordBroadcast: (rec: BroadcastRecord) => Promise<void>;
};

/**
 * - `settled`: the transfer is mined (one confirmation); `reference` is the transaction hash.
 * - `pending`: sent, outcome not known within the bound; the reconciler finishes it.
 * - `failed`: funds did not move and this attempt can no longer move them.
 */
export type SettleOutcome =
  | { status: 'settled'; reference: string }
  | { status: 'pending'; reference: string | null }
  | { status: 'failed'; code: ReasonCode; human: string };

export type ReconcileInput = {
  proof: PaymentProof;
  /** Every transaction recorded for the attempt, oldest first (may be empty: a crash before the first send). */
  broadcasts: BroadcastRecord[];
  nowSec: number;
};

export type FacilitatorHealth = { ok: boolean; detail: Record<string, unknown> };

/**
 * An x402 facilitator strategy (server/src/rails). `settle` is idempotent on
 * (chain, payer, nonce): the engine calls it once per attempt, and `reconcile` never
 * broadcasts a new transaction, so one authorization is never carried by two transactions.
 */
export interface Facilitator {
  /** `mock`, `onchain` or `remote`. */
  readonly name: string;
  /** True when settle talks to nothing outside this process (the mock): it may run inside a transaction. */
  readonly inProcess: boolean;
  /** Off-chain checks (and, live, a simulation); refusals carry the same codes in every mode. */
  verify(proof: PaymentProof, nowSec: number): Promise<VerifyResult>;
  settle(proof: PaymentProof, opts: SettleOptions): Promise<SettleOutcome>;
  /** Reads the chain to finish an attempt left unresolved (timeout, crash between phases). */
  reconcile(input: ReconcileInput): Promise<SettleOutcome>;
  /** For /readyz and start-up logs: RPC reachability, relayer gas balances. */
  health(): Promise<FacilitatorHealth>;
  /** Live facilitators: the USDC balance of an address on their chain (balanceOf), within `timeoutMs` (else 503 FACILITATOR_UNAVAILABLE). */
  usdcBalanceOf?(owner: string, timeoutMs: number): Promise<{ chain: ChainName; baseUnits: bigint }>;
  close(): Promise<void>;
}
