import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type { Address, Hex } from 'viem';
import { CHAINS } from '@svc/contract';
import { EIP3009_TOKEN_RUNTIME, MULTICALL3_RUNTIME } from './eip3009-token.artifact.js';

/**
 * A local anvil node the way the tests and `svc dev chain` run it: the binary of the
 * @foundry-rs/anvil package (spawned itself: `npx anvil` wraps it in a node process that a kill
 * would orphan), the test USDC (EIP-3009, EIP-712 domain "USD Coin" / "2", name and version are
 * constants of its code, so no storage to set) at Base's USDC address, and Multicall3.
 */

export const USDC_BASE = CHAINS.base.usdc as Address;
export const MULTICALL3_ADDRESS: Address = '0xcA11bde05977b3631167028862bE2a173976CA11';
/** anvil's first default account (funded with 10,000 ETH); used to mint and send helper txs. */
export const ANVIL_DEV_KEY: Hex = '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80';

export function anvilBinary(): string {
  const require = createRequire(import.meta.url);
  let pkg: string;
  try {
    pkg = require.resolve('@foundry-rs/anvil-linux-amd64/package.json');
  } catch {
    throw new Error('anvil is not installed: npm ci installs @foundry-rs/anvil-linux-amd64 (linux x64); elsewhere install foundry and put anvil on the PATH');
  }
  const bin = join(dirname(pkg), 'bin', 'anvil');
  if (!existsSync(bin)) throw new Error(`anvil binary not found at ${bin}`);
  return bin;
}

export async function rpcCall<T>(url: string, method: string, params: unknown[] = []): Promise<T> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
  const body = (await res.json()) as { result?: T; error?: { message: string } };
  if (body.error) throw new Error(`${method}: ${body.error.message}`);
  return body.result as T;
}

/**
 * Spawns anvil on 127.0.0.1:`port` and waits (60 s at most) until it answers with `chainId`;
 * `onSpawn` sees the process at once (to kill it if the caller exits while it starts).
 */
export async function spawnAnvil(opts: { port: number; chainId: number; args?: string[]; onSpawn?: (proc: ChildProcess) => void }): Promise<{ proc: ChildProcess; url: string }> {
  const args = ['--port', String(opts.port), '--host', '127.0.0.1', '--chain-id', String(opts.chainId), '--silent', ...(opts.args ?? [])];
  const proc = spawn(anvilBinary(), args, { stdio: ['ignore', 'ignore', 'pipe'] });
  opts.onSpawn?.(proc);
  let stderr = '';
  proc.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
  const url = `http://127.0.0.1:${opts.port}`;
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    if (proc.exitCode !== null) throw new Error(`anvil exited (${proc.exitCode}): ${stderr.slice(0, 500)}`);
    try {
      const id = await rpcCall<Hex>(url, 'eth_chainId');
      if (Number(id) === opts.chainId) return { proc, url };
    } catch {
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  proc.kill('SIGKILL');
  throw new Error(`anvil did not answer on ${url} within 60 s: ${stderr.slice(0, 500)}`);
}

/** Puts `tokenCode` (default the test USDC) at the USDC address and Multicall3 at its address. */
export async function installChainCode(url: string, tokenCode: Hex = EIP3009_TOKEN_RUNTIME): Promise<void> {
  await rpcCall(url, 'anvil_setCode', [USDC_BASE, tokenCode]);
  await rpcCall(url, 'anvil_setCode', [MULTICALL3_ADDRESS, MULTICALL3_RUNTIME]);
}
