import type { ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  createPublicClient,
  createWalletClient,
  http,
  parseSignature,
  publicActions,
  type Address,
  type Hex,
  type PublicClient,
} from 'viem';
import { privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { base } from 'viem/chains';
import {
  EIP3009_TOKEN_5267_RUNTIME,
  EIP3009_TOKEN_ABI,
  EIP3009_TOKEN_OTHER_NAME_RUNTIME,
  EIP3009_TOKEN_RUNTIME,
} from '../../src/dev-chain/eip3009-token.artifact.js';
import { ANVIL_DEV_KEY, installChainCode, rpcCall, spawnAnvil, USDC_BASE } from '../../src/dev-chain/anvil.js';
import type { PaymentProof } from '../../src/rails/types.js';
import { freePort } from './spawn.js';

export { ANVIL_DEV_KEY, MULTICALL3_ADDRESS, USDC_BASE } from '../../src/dev-chain/anvil.js';

export type AnvilOptions = {
  /** Seconds between blocks; unset = automine (a block per transaction). */
  blockTime?: number;
  /** Start with mining off (mine with `mine()`); overrides blockTime. */
  noMining?: boolean;
  /** The node's chain id; default 8453 (Base). */
  chainId?: number;
  /** What sits at the USDC address at start (`installToken`); default the test token. */
  token?: TokenCode;
};

/**
 * The code at the USDC address: the test token (`usdc`), its variant under the EIP-712 name
 * "USDC" (`other-name`), its variant whose EIP-5267 eip712Domain() says version "1"
 * (`eip5267-v1`), or nothing (`none`: a fresh chain).
 */
export type TokenCode = 'usdc' | 'other-name' | 'eip5267-v1' | 'none';
const TOKEN_CODE: Record<TokenCode, Hex> = {
  usdc: EIP3009_TOKEN_RUNTIME,
  'other-name': EIP3009_TOKEN_OTHER_NAME_RUNTIME,
  'eip5267-v1': EIP3009_TOKEN_5267_RUNTIME,
  none: '0x',
};

export type Anvil = {
  rpcUrl: string;
  /** The node's process id (its CPU time is in /proc/<pid>/stat). */
  pid: number;
  port: number;
  client: PublicClient;
  rpc: <T = unknown>(method: string, params?: unknown[]) => Promise<T>;
  setEthBalance: (addr: Address, wei: bigint) => Promise<void>;
  mintUsdc: (to: Address, amount: bigint) => Promise<void>;
  usdcBalance: (addr: Address) => Promise<bigint>;
  mine: (blocks?: number) => Promise<void>;
  setAutomine: (on: boolean) => Promise<void>;
  /** Replaces the code at the USDC address (balances and authorization states stay in storage). */
  installToken: (code: TokenCode) => Promise<void>;
  /**
   * The payer's cancelAuthorization (FiatToken v2.2): `payer` signs CancelAuthorization(authorizer,
   * nonce) and the dev account sends it with a priority fee of `tipGwei` (default 100, so a block
   * orders it ahead of a relayer's transfer). Answers the hash once the node holds it; not mined
   * while mining is off.
   */
  cancelAuthorization: (payer: PrivateKeyAccount, nonce: Hex, opts?: { tipGwei?: bigint }) => Promise<Hex>;
  /**
   * transferWithAuthorization of `proof` sent by the dev account (anyone may carry a signed
   * authorization): a priority fee of `tipGwei` when given, and with `gas` no simulation, so it
   * is sent even when it will revert. Answers the hash once the node holds it.
   */
  sendAuthorization: (proof: PaymentProof, opts?: { gas?: bigint; tipGwei?: bigint }) => Promise<Hex>;
  stop: () => Promise<void>;
};

const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // a crashed or interrupted test run must not leave anvil nodes behind
  process.on('exit', () => {
    for (const p of live) p.kill('SIGKILL');
  });
}

/** A port the OS just handed out; a tiny race with other processes, retried by startAnvil. */
async function spawnOnce(opts: AnvilOptions): Promise<{ proc: ChildProcess; port: number; url: string }> {
  const port = await freePort();
  const args = ['--accounts', '2'];
  if (opts.noMining) args.push('--no-mining');
  else if (opts.blockTime) args.push('--block-time', String(opts.blockTime));
  const track = (proc: ChildProcess) => {
    live.add(proc);
    proc.on('exit', () => live.delete(proc));
  };
  const { proc, url } = await spawnAnvil({ port, chainId: opts.chainId ?? 8453, args, onSpawn: track });
  return { proc, port, url };
}

/** Starts a private anvil (chain id 8453 unless told) with the test token at the real USDC address and Multicall3. */
export async function startAnvil(opts: AnvilOptions = {}): Promise<Anvil> {
  installExitHook();
  let started: Awaited<ReturnType<typeof spawnOnce>> | undefined;
  for (let attempt = 0; !started; attempt++) {
    try {
      started = await spawnOnce(opts);
    } catch (err) {
      if (attempt >= 2) throw err;
    }
  }
  const { proc, port, url } = started;
  const rpc = <T = unknown>(method: string, params: unknown[] = []) => rpcCall<T>(url, method, params);
  const installToken = async (code: TokenCode) => {
    await rpc('anvil_setCode', [USDC_BASE, TOKEN_CODE[code]]);
  };
  await installChainCode(url, TOKEN_CODE[opts.token ?? 'usdc']);

  const onChain = { ...base, id: opts.chainId ?? base.id };
  const client = createPublicClient({ chain: onChain, transport: http(url, { retryCount: 0 }) }) as PublicClient;
  const dev = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), chain: onChain, transport: http(url) }).extend(publicActions);

  const mine = async (blocks = 1) => {
    await rpc('anvil_mine', [`0x${blocks.toString(16)}`]);
  };

  /** EIP-1559 fees with this priority fee, and a cap well above the next base fee. */
  const tipFees = async (tipGwei: bigint) => {
    const tip = tipGwei * 10n ** 9n;
    const block = await client.getBlock();
    return { maxPriorityFeePerGas: tip, maxFeePerGas: tip + 4n * (block.baseFeePerGas ?? 0n) };
  };

  const mintUsdc = async (to: Address, amount: bigint) => {
    const hash = await dev.writeContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'mint', args: [to, amount] });
    if (opts.noMining) await mine();
    const receipt = await dev.waitForTransactionReceipt({ hash, pollingInterval: 50 });
    if (receipt.status !== 'success') throw new Error('mint reverted');
  };

  return {
    rpcUrl: url,
    pid: proc.pid!,
    port,
    client,
    rpc,
    setEthBalance: async (addr, wei) => {
      await rpc('anvil_setBalance', [addr, `0x${wei.toString(16)}`]);
    },
    mintUsdc,
    usdcBalance: (addr) => client.readContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'balanceOf', args: [addr] }),
    mine,
    setAutomine: async (on) => {
      await rpc('evm_setAutomine', [on]);
    },
    installToken,
    cancelAuthorization: async (payer, nonce, o = {}) => {
      const signature = await payer.signTypedData({
        domain: { name: 'USD Coin', version: '2', chainId: base.id, verifyingContract: USDC_BASE },
        types: { CancelAuthorization: [{ name: 'authorizer', type: 'address' }, { name: 'nonce', type: 'bytes32' }] },
        primaryType: 'CancelAuthorization',
        message: { authorizer: payer.address, nonce },
      });
      const { r, s, v } = parseSignature(signature);
      return dev.writeContract({
        address: USDC_BASE,
        abi: EIP3009_TOKEN_ABI,
        functionName: 'cancelAuthorization',
        args: [payer.address, nonce, Number(v), r, s],
        gas: 200_000n,
        ...(await tipFees(o.tipGwei ?? 100n)),
      });
    },
    sendAuthorization: async (proof, o = {}) => {
      const a = proof.authorization;
      const { r, s, v } = parseSignature(proof.signature);
      return dev.writeContract({
        address: USDC_BASE,
        abi: EIP3009_TOKEN_ABI,
        functionName: 'transferWithAuthorization',
        args: [a.from as Hex, a.to as Hex, BigInt(a.value), BigInt(a.validAfter), BigInt(a.validBefore), a.nonce as Hex, Number(v), r, s],
        ...(o.gas === undefined ? {} : { gas: o.gas }),
        ...(o.tipGwei === undefined ? {} : await tipFees(o.tipGwei)),
      });
    },
    stop: async () => {
      if (proc.exitCode !== null) return;
      await new Promise<void>((resolve) => {
        proc.once('exit', () => resolve());
        proc.kill('SIGTERM');
        setTimeout(() => proc.kill('SIGKILL'), 2000).unref();
      });
    },
  };
}

/** A JSON-RPC proxy in front of a node that counts the methods it forwards (batches included). */
export type RpcCounter = { url: string; counts: Map<string, number>; total: () => number; reset: () => void; close: () => Promise<void> };

export async function countingRpcProxy(targetUrl: string): Promise<RpcCounter> {
  const counts = new Map<string, number>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      try {
        const parsed = JSON.parse(body) as { method?: string } | Array<{ method?: string }>;
        for (const call of Array.isArray(parsed) ? parsed : [parsed]) counts.set(call.method ?? '?', (counts.get(call.method ?? '?') ?? 0) + 1);
      } catch {
        counts.set('(unparsable)', (counts.get('(unparsable)') ?? 0) + 1);
      }
      fetch(targetUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
        .then(async (r) => {
          res.writeHead(r.status, { 'content-type': 'application/json' });
          res.end(await r.text());
        })
        .catch(() => {
          res.writeHead(502);
          res.end();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    counts,
    total: () => [...counts.values()].reduce((a, b) => a + b, 0),
    reset: () => counts.clear(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
