import type { Address, PublicClient } from 'viem';
import type { ChainGuard } from './chain-guard.js';
import { authorizationAt, chainSnapshot, hashesOf, usedAuthorizationOutcome, type ChainSnapshot } from './evm-reads.js';
import type { ReconcileInput, SettleOutcome } from './types.js';

/**
 * Reconcile's first half, the same for every live facilitator (onchain/facilitator.ts,
 * remote.ts). The chain check first: judged on another chain or token, a transfer that moved
 * would read as never sent and be released. Then the authorization judged at one block, so a
 * transfer mined between two reads is never released: used, the outcome the chain shows
 * (usedAuthorizationOutcome); expired unused, failed PAYMENT_EXPIRED with `expiredHuman` (each
 * facilitator says why in its words); else still open at block `at`, for the facilitator's
 * second half to judge its broadcasts.
 */
export async function judgeAuthorizationOnChain(
  chain: { guard: Pick<ChainGuard, 'ready'>; client: PublicClient; token: Address; logLookbackBlocks: bigint },
  input: ReconcileInput,
  expiredHuman: string,
): Promise<{ outcome: SettleOutcome } | { openAt: ChainSnapshot }> {
  const { proof, broadcasts } = input;
  await chain.guard.ready();
  const at = await chainSnapshot(chain.client);
  const state = await authorizationAt(chain.client, chain.token, proof, at);
  if (state === 'used') return { outcome: await usedAuthorizationOutcome(chain.client, chain.token, proof, hashesOf(broadcasts), chain.logLookbackBlocks, at) };
  if (state === 'expired') return { outcome: { status: 'failed', code: 'PAYMENT_EXPIRED', human: expiredHuman } };
  return { openAt: at };
}
