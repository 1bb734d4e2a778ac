import type { Config } from '../config.js';
import type { Logger } from '../lib/logger.js';
import type { Signers } from '../lib/eip3009.js';
import { ApiError } from '../lib/errors.js';
import { newUlid } from '../lib/ids.js';
import { UnconfiguredLiveFacilitator } from './live-facilitator.js';
import { MockFacilitator } from './mock-facilitator.js';
import type { Facilitator, FacilitatorHealth } from './types.js';
import { OnchainFacilitator } from './onchain/facilitator.js';
import { RemoteFacilitator } from './remote.js';

export type * from './types.js';
export { MockFacilitator, mockReference, MOCK_CHAIN, type MockFacilitatorOptions } from './mock-facilitator.js';
export { UnconfiguredLiveFacilitator } from './live-facilitator.js';
export { OnchainFacilitator, type OnchainFacilitatorConfig, type OnchainFacilitatorOptions } from './onchain/facilitator.js';
export { RemoteFacilitator, type RemoteFacilitatorConfig, type RemoteFacilitatorOptions } from './remote.js';

/** One facilitator per mode, built once at start (services.facilitators). */
export type Facilitators = { test: Facilitator; live: Facilitator };

/** Test mode settles x402 through the mock; live mode through the configured facilitator, never the mock. */
/**
 * Which of SVC_WEB_CONCURRENCY server processes this is (main.ts, node:cluster): process
 * `slot` of `of` broadcasts from relayer keys slot, slot + of, slot + 2·of… only, since two
 * processes sharing a key would race for its nonces.
 */
export type ProcessSlot = { slot: number; of: number };

export function createFacilitators(config: Config, log: Logger, signers?: Signers, processSlot?: ProcessSlot): Facilitators {
  const wallets = { erc6492Factories: config.SVC_ERC6492_FACTORIES };
  const test = new MockFacilitator({ ...(signers ? { signers } : {}), ...wallets, ...(config.SVC_RPC_URL_BASE_SEPOLIA ? { rpcUrl: config.SVC_RPC_URL_BASE_SEPOLIA } : {}) });
  return { test, live: createLiveFacilitator(config, log, signers, processSlot) };
}

/** The relayer keys of one server process (all of them outside a cluster). */
export function relayerKeysOf(keys: `0x${string}`[], processSlot?: ProcessSlot): `0x${string}`[] {
  if (!processSlot || processSlot.of <= 1) return keys;
  return keys.filter((_, i) => i % processSlot.of === processSlot.slot);
}

/** SVC_LIVE_FACILITATOR picks the live strategy; loadConfig has already checked the variables it needs. */
export function createLiveFacilitator(config: Config, log: Logger, signers?: Signers, processSlot?: ProcessSlot): Facilitator {
  const rpcUrl = config.SVC_RPC_URL_BASE;
  if (config.SVC_LIVE_FACILITATOR === 'onchain' && rpcUrl && config.SVC_RELAYER_PRIVATE_KEYS) {
    return new OnchainFacilitator({
      rpcUrl,
      privateKeys: relayerKeysOf(config.SVC_RELAYER_PRIVATE_KEYS, processSlot),
      chain: 'base',
      log: log.child({ facilitator: 'onchain' }),
      erc6492Factories: config.SVC_ERC6492_FACTORIES,
      ...(signers ? { signers } : {}),
      options: config.SVC_RELAYER_MIN_BALANCE_WEI === undefined ? {} : { minRelayerBalanceWei: config.SVC_RELAYER_MIN_BALANCE_WEI },
    });
  }
  if (config.SVC_LIVE_FACILITATOR === 'remote' && rpcUrl && config.SVC_FACILITATOR_URL) {
    return new RemoteFacilitator({
      url: config.SVC_FACILITATOR_URL,
      authHeader: config.SVC_FACILITATOR_AUTH_HEADER,
      rpcUrl,
      log: log.child({ facilitator: 'remote' }),
      erc6492Factories: config.SVC_ERC6492_FACTORIES,
      ...(signers ? { signers } : {}),
    });
  }
  return new UnconfiguredLiveFacilitator();
}

export function facilitatorFor(facilitators: Facilitators, livemode: boolean): Facilitator {
  return livemode ? facilitators.live : facilitators.test;
}

/** The test-only `mock` rail: nothing to verify, a fresh `mock_<ulid>` reference. */
export function settleMockRail(): { reference: string } {
  return { reference: `mock_${newUlid()}` };
}

/** The `card` rail is a typed stub: settling it is 402 RAIL_NOT_IMPLEMENTED in the settle 402 body shape. */
export function cardRailNotImplemented(): ApiError {
  return new ApiError('RAIL_NOT_IMPLEMENTED', 'The card rail is a typed stub in v1 and cannot settle; pay over x402.', {
    extra: { status: 'payment_invalid' },
  });
}

/**
 * The live facilitator's health for /readyz, bounded in time: a hung RPC reads as not ok. When
 * not ok, `detail.cause` is one line naming the problem.
 */
export async function liveReadiness(f: Facilitator, timeoutMs: number): Promise<{ facilitator: string; ok: boolean; detail: Record<string, unknown> }> {
  const name = f.name === 'unconfigured-live' ? 'none' : f.name;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<FacilitatorHealth>((resolve) => {
    timer = setTimeout(() => resolve({ ok: false, detail: { cause: `The live facilitator's checks gave no answer within ${timeoutMs} ms.` } }), timeoutMs);
  });
  try {
    const failed = (err: unknown): FacilitatorHealth => ({ ok: false, detail: { cause: err instanceof ApiError ? err.human : 'The live facilitator\'s checks failed.' } });
    const h = await Promise.race([f.health().catch(failed), timeout]);
    return { facilitator: name, ok: h.ok, detail: h.detail };
  } finally {
    clearTimeout(timer);
  }
}
