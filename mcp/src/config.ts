import { homedir } from 'node:os';
import { join } from 'node:path';
import { CHAINS, type ChainName } from '@svc/contract';
import { toBaseUnits } from './amounts.js';

/** A bad environment variable: the message names it and never repeats a secret's value. */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}

export type BuyerConfig = {
  /** 0x + 64 hex digits. Read once, then removed from process.env by the bin. */
  privateKey: `0x${string}`;
  /** USDC base units. */
  maxPerPayment: bigint;
  maxPerDay: bigint;
  /** Lower-cased merchant ids, slugs or domains; null: any merchant. */
  allowedMerchants: string[] | null;
  /**
   * Hosts (`host[:port]`, lower-cased) of the svc-checkout deployments whose merchant ids and
   * slugs `allowedMerchants` names: an id or slug entry matches only a manifest read from one of
   * them (anyone can serve a manifest that claims a merchant's id).
   */
  serviceHosts: string[];
  allowedChains: ChainName[];
  spendingFile: string;
  /** A stable UUID for reputation; derived from the wallet address when not set. */
  agentId: string | undefined;
};

export const DEFAULTS = { maxPerPayment: '10.00', maxPerDay: '50.00', allowedChains: ['base-sepolia'] as ChainName[] };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function list(value: string | undefined): string[] | null {
  if (value === undefined || value.trim() === '' || value.trim() === '*') return null;
  return value.split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
}

function amount(env: Record<string, string | undefined>, name: string, fallback: string): bigint {
  const raw = env[name]?.trim() || fallback;
  const units = toBaseUnits(raw);
  if (units === null) throw new ConfigError(`${name} must be a decimal amount in USD such as 25.00 (at most 6 decimals)`);
  return units;
}

/** An allowlist entry that is a merchant id or slug (no dot, not localhost), not a domain. */
export const isMerchantRef = (entry: string) => !entry.includes('.') && entry !== 'localhost';

/** Reads and checks the whole configuration once, at start. */
export function loadBuyerConfig(env: Record<string, string | undefined>): BuyerConfig {
  const rawKey = env.SVC_WALLET_PRIVATE_KEY?.trim();
  if (!rawKey) throw new ConfigError('SVC_WALLET_PRIVATE_KEY is required: the hex private key of the paying wallet');
  const hex = rawKey.replace(/^0x/i, '');
  // The message says what is wrong and never echoes the value.
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new ConfigError('SVC_WALLET_PRIVATE_KEY must be 32 bytes of hex (64 hex digits, 0x optional)');

  const chains = list(env.SVC_MCP_ALLOWED_CHAINS) ?? DEFAULTS.allowedChains;
  for (const c of chains) {
    if (!(c in CHAINS)) throw new ConfigError(`SVC_MCP_ALLOWED_CHAINS: unknown chain ${JSON.stringify(c)} (known: ${Object.keys(CHAINS).join(', ')})`);
  }
  const allowedMerchants = list(env.SVC_MCP_ALLOWED_MERCHANTS);
  const serviceHosts = (list(env.SVC_MCP_SERVICE_URL) ?? []).map((u) => {
    try {
      const parsed = new URL(u);
      if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not http');
      return parsed.host;
    } catch {
      throw new ConfigError(`SVC_MCP_SERVICE_URL: ${JSON.stringify(u)} is not an http(s) URL such as https://checkout.example.com`);
    }
  });
  if (allowedMerchants?.some(isMerchantRef) && serviceHosts.length === 0) {
    throw new ConfigError(
      'SVC_MCP_ALLOWED_MERCHANTS names merchant ids or slugs: set SVC_MCP_SERVICE_URL to the svc-checkout deployment they belong to (ids and slugs are only trusted from its hosts), or list the merchants by domain',
    );
  }
  const agentId = env.SVC_MCP_AGENT_ID?.trim() || undefined;
  if (agentId !== undefined && !UUID.test(agentId)) throw new ConfigError('SVC_MCP_AGENT_ID must be a UUID');

  return {
    privateKey: `0x${hex.toLowerCase()}`,
    maxPerPayment: amount(env, 'SVC_MCP_MAX_PER_PAYMENT', DEFAULTS.maxPerPayment),
    maxPerDay: amount(env, 'SVC_MCP_MAX_PER_DAY', DEFAULTS.maxPerDay),
    allowedMerchants,
    serviceHosts,
    allowedChains: chains as ChainName[],
    spendingFile: env.SVC_MCP_SPENDING_FILE?.trim() || join(homedir(), '.svc-mcp', 'spending.json'),
    agentId,
  };
}
