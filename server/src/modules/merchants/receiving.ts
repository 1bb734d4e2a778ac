import { getAddress, isAddress } from 'viem';
import { CHAINS, type ChainName, type Finding, type RailName, type Receiving, type ReasonCode } from '@svc/contract';

/** A validation finding (the contract's Finding) with its code from the registry. */
export type ReceivingFinding = Finding & { code: ReasonCode };

/** The (chain, asset) pairs x402 can settle. */
export const TOKEN_REGISTRY: Record<ChainName, readonly string[]> = { base: ['USDC'], 'base-sepolia': ['USDC'] };

const RAILS: readonly RailName[] = ['x402', 'card', 'mock'];
const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const nonEmpty = (v: unknown): v is string => typeof v === 'string' && v.trim().length > 0;

/**
 * Validates and normalizes a receiving object (section 2.3): every problem becomes a
 * finding with its RECEIVING_* code; addresses come back EIP-55 checksummed, assets upper-cased.
 */
export function checkReceiving(input: unknown, livemode: boolean): { receiving: Receiving; findings: ReceivingFinding[] } {
  const findings: ReceivingFinding[] = [];
  const out: Receiving = {};
  if (!isObj(input)) {
    return { receiving: out, findings: [{ code: 'RECEIVING_NO_RAIL_ENABLED', human: 'receiving must be an object keyed by rail.' }] };
  }
  for (const [rail, cfg] of Object.entries(input)) {
    if (!(RAILS as readonly string[]).includes(rail)) {
      findings.push({ code: 'RECEIVING_RAIL_UNKNOWN', human: `receiving.${rail}: unknown rail; use x402, card or mock.` });
      continue;
    }
    if (!isObj(cfg)) {
      findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: `receiving.${rail}: must be an object.` });
      continue;
    }
    if (rail === 'x402') {
      const { chain, address, asset } = cfg;
      const extra = Object.keys(cfg).filter((k) => !['chain', 'address', 'asset'].includes(k));
      if (extra.length) findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: `receiving.x402: unknown field(s) ${extra.join(', ')}.` });
      if (!nonEmpty(chain)) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.x402.chain: is required.' });
      } else if (!(chain in CHAINS)) {
        findings.push({ code: 'RECEIVING_CHAIN_UNSUPPORTED', human: `receiving.x402.chain: "${chain}" is not base or base-sepolia.` });
      }
      let normalized: string | undefined;
      if (!nonEmpty(address)) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.x402.address: is required.' });
      } else if (!/^0x[0-9a-fA-F]{40}$/.test(address) || !isAddress(address, { strict: false })) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.x402.address: must be a 20-byte 0x-prefixed hex address.' });
      } else if (address !== address.toLowerCase() && address.slice(2) !== address.slice(2).toUpperCase() && !isAddress(address, { strict: true })) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.x402.address: mixed-case address fails its EIP-55 checksum.' });
      } else {
        normalized = getAddress(address);
      }
      const assetValue = asset === undefined ? 'USDC' : asset;
      let assetUpper: string | undefined;
      if (!nonEmpty(assetValue)) {
        findings.push({ code: 'RECEIVING_ASSET_UNKNOWN', human: 'receiving.x402.asset: must be a string such as USDC.' });
      } else {
        assetUpper = assetValue.toUpperCase();
        if (nonEmpty(chain) && chain in CHAINS && !TOKEN_REGISTRY[chain as ChainName].includes(assetUpper)) {
          findings.push({ code: 'RECEIVING_ASSET_UNKNOWN', human: `receiving.x402.asset: ${assetUpper} on ${chain} is not in the token registry (USDC only).` });
        }
      }
      if (nonEmpty(chain) && chain in CHAINS && normalized && assetUpper === 'USDC') {
        out.x402 = { chain: chain as ChainName, address: normalized, asset: 'USDC' };
      }
      if (nonEmpty(chain) && chain in CHAINS && CHAINS[chain as ChainName].livemode !== livemode) {
        findings.push({
          code: 'RECEIVING_CHAIN_UNSUPPORTED',
          human: `receiving.x402.chain: ${livemode ? 'live merchants settle on base' : 'test merchants settle on base-sepolia'}, not ${chain}.`,
        });
      }
    } else if (rail === 'card') {
      const { processor, accountId } = cfg;
      if (!nonEmpty(processor) || !nonEmpty(accountId)) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.card: processor and accountId are required strings.' });
      } else {
        out.card = { processor, accountId };
      }
    } else {
      if (livemode) {
        findings.push({ code: 'RECEIVING_MOCK_IN_LIVE', human: 'receiving.mock: the mock rail cannot be used on a live merchant.' });
        continue;
      }
      const { account } = cfg;
      if (!nonEmpty(account)) {
        findings.push({ code: 'RECEIVING_ADDRESS_INVALID', human: 'receiving.mock.account: is required.' });
      } else {
        out.mock = { account };
      }
    }
  }
  if (Object.keys(input).length === 0) {
    findings.push({ code: 'RECEIVING_NO_RAIL_ENABLED', human: 'receiving: at least one rail must be configured.' });
  }
  return { receiving: out, findings };
}

/** Rails a merchant can actually take: listed in `rails` and configured in receiving. */
export function effectiveRails(rails: RailName[], receiving: Receiving): RailName[] {
  return rails.filter((r) => receiving[r] !== undefined);
}
