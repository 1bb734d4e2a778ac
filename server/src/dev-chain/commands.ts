import type { ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { createPublicClient, createWalletClient, formatEther, formatUnits, http, isAddress, parseUnits, type Address, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { base } from 'viem/chains';
import { loadConfig } from '../config.js';
import { ANVIL_DEV_KEY, installChainCode, spawnAnvil, USDC_BASE } from './anvil.js';
import { EIP3009_TOKEN_ABI } from './eip3009-token.artifact.js';

/**
 * `svc dev chain` and `svc dev balance`: a local Base (chain id 8453) for trying live mode,
 * and the balances on it without foundry's cast. Neither opens the database.
 */

export const DEV_USAGE = `usage: npm run svc -- dev <command>

  dev chain [--port 8545]                     start a local Base (anvil, chain id 8453) with the test USDC
                                              at Base's USDC address, a funded relayer and buyer; prints the
                                              server's live-mode variables; Ctrl-C stops it (npm run chain)
  dev balance <address>... [--rpc <url>]      print each address's USDC and ETH balance on that node
                                              (default: the running \`dev chain\`, else http://127.0.0.1:8545)`;

export const DEV_CHAIN_PORT = 8545;
/** What the buyer holds at start, in USDC. */
const BUYER_USDC = '100';

/**
 * anvil's default accounts 1-3 (of its public test mnemonic, "test … junk"; each with 10,000 ETH): fixed, so the
 * README's commands can name them. Never use these keys on a real chain.
 */
export const DEV_ACCOUNTS = {
  relayer: '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  buyer: '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  merchant: '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
} as const satisfies Record<string, Hex>;

export class DevUsageError extends Error {}

/**
 * While `dev chain` runs, `<SVC_DATA_DIR>/dev-chain.json` names its node, so `dev balance` finds
 * a chain started on another port without --rpc.
 */
const chainFileOf = (env: NodeJS.ProcessEnv) => join(loadConfig(env).SVC_DATA_DIR, 'dev-chain.json');

function runningChainUrl(env: NodeJS.ProcessEnv): string | undefined {
  try {
    const url = (JSON.parse(readFileSync(chainFileOf(env), 'utf8')) as { rpc_url?: unknown }).rpc_url;
    return typeof url === 'string' ? url : undefined;
  } catch {
    return undefined;
  }
}

const clientFor = (url: string) => createPublicClient({ chain: base, transport: http(url, { retryCount: 0 }) });

/** Each address's USDC and ETH as exact decimal strings, one line each. */
export async function balanceLines(rpcUrl: string, addresses: Address[]): Promise<string[]> {
  const client = clientFor(rpcUrl);
  return Promise.all(
    addresses.map(async (address) => {
      const [usdc, eth] = await Promise.all([
        client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'balanceOf', args: [address] }),
        client.getBalance({ address }),
      ]);
      return `${address}  ${formatUnits(usdc, 6)} USDC  ${formatEther(eth)} ETH`;
    }),
  );
}

/** Starts the chain, funds the buyer, prints what to run next; resolves when anvil exits. */
async function devChain(port: number, out: (line: string) => void, env: NodeJS.ProcessEnv): Promise<number> {
  const chainFile = chainFileOf(env);
  // Ctrl-C (or SIGTERM) stops anvil, from the moment it is spawned; this process exits with it.
  const stopOnSignals = (anvil: ChildProcess) => {
    const stop = () => anvil.kill('SIGTERM');
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    process.once('exit', () => anvil.kill('SIGKILL'));
  };
  const { proc, url } = await spawnAnvil({ port, chainId: base.id, args: ['--accounts', '4'], onSpawn: stopOnSignals });
  const exited = new Promise<number>((res) =>
    proc.once('exit', (code) => {
      rmSync(chainFile, { force: true });
      res(code ?? 0);
    }),
  );
  try {
    await installChainCode(url);
    const minter = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), chain: base, transport: http(url) });
    const [relayer, buyer, merchant] = [DEV_ACCOUNTS.relayer, DEV_ACCOUNTS.buyer, DEV_ACCOUNTS.merchant].map((k) => privateKeyToAccount(k).address);
    const hash = await minter.writeContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'mint', args: [buyer!, parseUnits(BUYER_USDC, 6)] });
    const receipt = await clientFor(url).waitForTransactionReceipt({ hash, pollingInterval: 50 });
    if (receipt.status !== 'success') throw new Error('minting the buyer\'s USDC reverted');
    const [r, b, m] = await balanceLines(url, [relayer!, buyer!, merchant!]);
    out(`A local Base: anvil, chain id ${base.id}, the test USDC ("USD Coin", version 2, EIP-3009) at ${USDC_BASE}.`);
    out('');
    out('Start the server in live mode (another terminal):');
    out(`  SVC_LIVE_FACILITATOR=onchain SVC_RPC_URL_BASE=${url} SVC_RELAYER_PRIVATE_KEYS=${DEV_ACCOUNTS.relayer} npm start`);
    out('');
    out(`relayer   ${r}   (pays gas; SVC_RELAYER_PRIVATE_KEYS above)`);
    out(`buyer     ${b}   key ${DEV_ACCOUNTS.buyer}`);
    out(`merchant  ${m}   key ${DEV_ACCOUNTS.merchant} (a receiving address)`);
    out('');
    out(`These are anvil's public test keys: never use them on a real chain. Balances: npm run svc -- dev balance <address>`);
    mkdirSync(dirname(chainFile), { recursive: true });
    writeFileSync(chainFile, JSON.stringify({ rpc_url: url, pid: process.pid }));
    out(`Development chain listening on ${url}; Ctrl-C stops it (its state is lost).`);
  } catch (err) {
    proc.kill('SIGTERM');
    throw err;
  }
  return exited;
}

/** Runs `dev <command>`; returns the exit code (for `dev chain`, once anvil has stopped). */
export async function runDev(argv: string[], out: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined || command === '--help' || command === '-h' || rest.includes('--help') || rest.includes('-h')) {
    out(DEV_USAGE);
    return 0;
  }
  let parsed;
  try {
    parsed = parseArgs({ args: rest, options: { port: { type: 'string' }, rpc: { type: 'string' } }, allowPositionals: command === 'balance', strict: true });
  } catch (err) {
    throw new DevUsageError(`dev ${command}: ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
  }
  if (command === 'chain') {
    const port = Number(parsed.values.port ?? DEV_CHAIN_PORT);
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw new DevUsageError(`dev chain: --port must be a port number, got ${parsed.values.port}`);
    return devChain(port, out, env);
  }
  if (command === 'balance') {
    const addresses = parsed.positionals;
    const bad = addresses.find((a) => !isAddress(a, { strict: false }));
    if (addresses.length === 0 || bad !== undefined) throw new DevUsageError(`dev balance needs 0x-prefixed 20-byte addresses${bad ? `, got ${bad}` : ''}`);
    const rpc = parsed.values.rpc ?? runningChainUrl(env) ?? `http://127.0.0.1:${DEV_CHAIN_PORT}`;
    try {
      for (const line of await balanceLines(rpc, addresses as Address[])) out(line);
    } catch (err) {
      throw new Error(`cannot read balances from ${rpc} (is \`npm run chain\` running? --rpc sets the node): ${err instanceof Error ? err.message.split('\n')[0] : String(err)}`);
    }
    return 0;
  }
  throw new DevUsageError(`unknown command "dev ${command}"; dev takes: chain, balance (npm run svc -- dev --help)`);
}
