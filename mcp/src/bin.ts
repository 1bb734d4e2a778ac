#!/usr/bin/env node
/**
 * `svc-mcp`: the buyer's MCP server on stdio. stdout carries only JSON-RPC; every log line goes
 * to stderr, through the redactor, and never holds the wallet key.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { privateKeyToAccount } from 'viem/accounts';
import { formatBaseUnits } from './amounts.js';
import { ConfigError, loadBuyerConfig } from './config.js';
import { makeRedactor } from './redact.js';
import { agentIdFor, createBuyerServer } from './server.js';

const rawKey = process.env.SVC_WALLET_PRIVATE_KEY ?? '';
// Whatever happens next (an error that dumps the environment, a child process), the key is not in it.
delete process.env.SVC_WALLET_PRIVATE_KEY;
const redact = /^(0x)?[0-9a-fA-F]{64}$/.test(rawKey.trim()) ? makeRedactor(rawKey.trim()) : (t: string) => (rawKey.trim() ? t.split(rawKey.trim()).join('[REDACTED]') : t);
const log = (line: string) => process.stderr.write(`${redact(`svc-mcp: ${line}`)}\n`);

process.on('uncaughtException', (err) => {
  log(`fatal: ${err instanceof Error ? err.message : String(err)}`);
  process.exit(1);
});
process.on('unhandledRejection', (err) => log(`unhandled: ${err instanceof Error ? err.message : String(err)}`));

let config;
try {
  config = loadBuyerConfig({ ...process.env, SVC_WALLET_PRIVATE_KEY: rawKey });
} catch (err) {
  log(err instanceof ConfigError ? err.message : `configuration: ${(err as Error).message}`);
  process.exit(2);
}

const server = createBuyerServer(config, { redact });
const address = privateKeyToAccount(config.privateKey).address;
await server.connect(new StdioServerTransport());
log(
  `ready: wallet ${address}, agent ${config.agentId ?? agentIdFor(address)}, max ${formatBaseUnits(config.maxPerPayment)} USDC per payment and ${formatBaseUnits(config.maxPerDay)} per UTC day, ` +
    `chains ${config.allowedChains.join(',')}, merchants ${config.allowedMerchants?.join(',') ?? 'any'}, spending file ${config.spendingFile}`,
);
