import type { Hex } from 'viem';
import type { ReasonCode } from '@svc/contract';
import type { Authorization } from '../modules/gate/eip712.js';
import type { ChainName } from '../modules/receiving/validate.js';

/** One x402 settlement attempt: the session's payment requirement and the agent's signed authorization. */
export type SettleRequest = {
  chain: ChainName;
  payTo: string;
  amountBaseUnits: string;
  authorization: Authorization;
  signature: Hex;
  nowSec: number;
};

/** `reference` is the settlement reference: for x402 the transaction hash. */
export type FacilitatorResult = { ok: true; reference: string; chain: ChainName } | { ok: false; code: ReasonCode; human: string };

/** An x402 facilitator strategy: verify checks the proof without moving funds; settle captures it. */
export interface Facilitator {
  readonly name: string;
  verify(req: SettleRequest): Promise<FacilitatorResult>;
  settle(req: SettleRequest): Promise<FacilitatorResult>;
}
