import type { Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import type { Anvil } from './anvil.js';
import type { Logger } from '../../src/lib/logger.js';
import { TestApp } from './harness.js';

/** A server in live mode on `chain`: the onchain facilitator with these relayer keys, each funded with 10 ETH. */
export async function startLiveApp(chain: Anvil, keys: Hex[], env: Record<string, string> = {}, opts: { log?: Logger } = {}): Promise<TestApp> {
  for (const k of keys) await chain.setEthBalance(privateKeyToAccount(k).address, 10n ** 19n);
  return TestApp.start(
    {
      SVC_LIVE_FACILITATOR: 'onchain',
      SVC_RPC_URL_BASE: chain.rpcUrl,
      SVC_RELAYER_PRIVATE_KEYS: keys.join(','),
      SVC_SETTLE_WAIT_MS: '8000',
      ...env,
    },
    opts,
  );
}
