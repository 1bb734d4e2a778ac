import { randomBytes, randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import express from 'express';
import { ulid } from 'ulid';
import { createWalletClient, http, publicActions, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { base } from 'viem/chains';
import { x402Facilitator } from '@x402/core/facilitator';
import type { FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload, PaymentRequirements, SupportedResponse } from '@x402/core/types';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client';
import { ExactEvmScheme as ExactEvmFacilitator } from '@x402/evm/exact/facilitator';
import { ExactEvmScheme as ExactEvmServer } from '@x402/evm/exact/server';
import { paymentMiddleware, x402ResourceServer } from '@x402/express';
import { wrapFetchWithPayment, x402Client } from '@x402/fetch';
import { CHAINS, SCOPES, TRANSFER_WITH_AUTHORIZATION_TYPES, type ChainName } from '@svc/contract';
import { buildApp } from '../src/app.js';
import { createServices } from '../src/boot.js';
import { loadConfig } from '../src/config.js';
import { createScratchDatabase } from '../src/db/scratch.js';
import type { DbTarget } from '../src/db/orm.js';
import { createLogger } from '../src/lib/logger.js';
import { createApiKey, createProject } from '../src/modules/accounts/service.js';
import { createLiveFacilitator } from '../src/rails/index.js';
import type { Services } from '../src/services.js';
import { EIP3009_TOKEN_ABI } from '../src/dev-chain/eip3009-token.artifact.js';
import { ANVIL_DEV_KEY, countingRpcProxy, startAnvil, USDC_BASE, type Anvil, type RpcCounter } from '../test/helpers/anvil.js';
import { cpuMsOf } from './proc.js';

/** One paid request: the wall time from its first byte out to the final answer, and whether that answer was 200. */
type Sample = { ms: number; ok: boolean; status: number };
export type CellResult = {
  n: number;
  ok: number;
  failed: number;
  statuses: Record<string, number>;
  seconds: number;
  perSec: number;
  p50: number;
  p99: number;
  samples: Sample[];
  /** CPU time of this process (server, buyers, reference: all in it) and of the anvil node during the cell, in ms. */
  cpuMs: number;
  anvilCpuMs: number;
};

export type LiveBenchOptions = {
  /** Concurrent buyers per cell. Default [1, 4, 16]. */
  buyers?: number[];
  /** Relayer accounts per side. Default [1, 4]. */
  relayers?: number[];
  /** anvil mining modes: 0 = automine, n = `--block-time n`. Default [0, 1]. */
  blockTimes?: number[];
  /** Paid requests in a cell with `b` buyers. Default: 6 for one buyer, else max(16, 4 b): four rounds per buyer at 16 buyers, so one slow request moves the figure less. */
  requestsPerCell?: (buyers: number) => number;
  /** Concurrent agents and settles for the test-mode mock line. Default 16 and 96. */
  mockAgents?: number;
  mockSettles?: number;
  /** Each side talks to anvil through a counting JSON-RPC proxy (in this process, so its figures are not for rates); the table gains the calls per paid request. */
  countRpc?: boolean;
};

const PRICE_USD = '0.01';
const PRICE_BASE_UNITS = 10_000n;
const NETWORK = 'eip155:8453' as const;
const REQUEST_TIMEOUT_MS = 30_000;

const silent = createLogger('silent');
const pct = (sorted: number[], p: number) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]! : NaN);

function summarize(samples: Sample[], seconds: number, cpuMs = 0, anvilCpuMs = 0): CellResult {
  const okMs = samples.filter((s) => s.ok).map((s) => s.ms).sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const s of samples) if (!s.ok) statuses[String(s.status)] = (statuses[String(s.status)] ?? 0) + 1;
  return {
    n: samples.length,
    ok: okMs.length,
    failed: samples.length - okMs.length,
    statuses,
    seconds,
    perSec: okMs.length / seconds,
    p50: pct(okMs, 50),
    p99: pct(okMs, 99),
    samples,
    cpuMs,
    anvilCpuMs,
  };
}

/** Two runs of one cell as one: every sample, and the time of both runs. */
const merge = (a: CellResult, b: CellResult) => summarize([...a.samples, ...b.samples], a.seconds + b.seconds, a.cpuMs + b.cpuMs, a.anvilCpuMs + b.anvilCpuMs);

/** The anvil node whose CPU time the cells read (one at a time). */
let anvilPid: number | null = null;
/** utime + stime of the anvil node in ms (0 when there is none). */
const processCpuMs = (pid: number | null): number => (pid === null ? 0 : cpuMsOf([pid]));

/** `buyers` loops run at once, each doing its share of `n` requests one after another; returns the cell's figures. */
async function runCell(n: number, buyers: number, one: (buyer: number, i: number) => Promise<{ ok: boolean; status: number }>): Promise<CellResult> {
  const samples: Sample[] = [];
  const started = performance.now();
  const cpu0 = process.cpuUsage();
  const anvil0 = processCpuMs(anvilPid);
  await Promise.all(
    Array.from({ length: buyers }, async (_, b) => {
      for (let i = b; i < n; i += buyers) {
        const t0 = performance.now();
        let r: { ok: boolean; status: number };
        try {
          r = await one(b, Math.floor(i / buyers));
        } catch {
          r = { ok: false, status: 0 };
        }
        samples.push({ ms: performance.now() - t0, ...r });
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return summarize(samples, (performance.now() - started) / 1000, (cpu.user + cpu.system) / 1000, processCpuMs(anvilPid) - anvil0);
}

const timedFetch: typeof fetch = (input, init) => fetch(input, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

/** Mints `amount` to every address in one burst of transactions (explicit nonces), then waits for all receipts. */
async function fund(anvil: Anvil, to: Address[], amount: bigint): Promise<void> {
  const dev = createWalletClient({ account: privateKeyToAccount(ANVIL_DEV_KEY), chain: base, transport: http(anvil.rpcUrl) }).extend(publicActions);
  let nonce = await dev.getTransactionCount({ address: dev.account.address, blockTag: 'pending' });
  const hashes: Hex[] = [];
  for (const addr of to) {
    hashes.push(await dev.writeContract({ address: USDC_BASE, abi: EIP3009_TOKEN_ABI, functionName: 'mint', args: [addr, amount], nonce: nonce++, gas: 200_000n }));
  }
  for (const hash of hashes) {
    const r = await dev.waitForTransactionReceipt({ hash, pollingInterval: 100 });
    if (r.status !== 'success') throw new Error('mint reverted');
  }
}

async function listen(app: express.Express): Promise<{ server: Server; url: string }> {
  return new Promise((resolve) => {
    const server = app.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }));
  });
}

async function close(server: Server): Promise<void> {
  server.closeAllConnections();
  await new Promise<void>((r) => server.close(() => r()));
}

/**
 * In-process FacilitatorClient for @x402/express: x402Facilitator.verify/settle/getSupported
 * called directly (no HTTP hop). With several relayer accounts, one x402Facilitator per account,
 * picked round robin per payment (the reference stack has no relayer pool of its own).
 */
class InProcessFacilitatorClient implements FacilitatorClient {
  private turn = 0;
  /** Why settles failed (errorReason or the thrown message), counted; read and cleared per cell. */
  readonly failures = new Map<string, number>();
  constructor(private readonly facilitators: x402Facilitator[]) {}
  verify(payload: PaymentPayload, req: PaymentRequirements) {
    return this.facilitators[0]!.verify(payload, req);
  }
  async settle(payload: PaymentPayload, req: PaymentRequirements) {
    const note = (why: string) => {
      // viem's errors carry the node's words on a `Details:` line; the rest is the request dump
      const details = /Details: ([^\n]+)/.exec(why)?.[1];
      const key = details ? `${why.split(':')[0]}: ${details}` : why;
      this.failures.set(key, (this.failures.get(key) ?? 0) + 1);
    };
    try {
      const res = await this.facilitators[this.turn++ % this.facilitators.length]!.settle(payload, req);
      if (!res.success) note(`${res.errorReason ?? 'unknown'}${res.errorMessage ? `: ${res.errorMessage}` : ''}`);
      return res;
    } catch (err) {
      const e = err as { errorReason?: string; errorMessage?: string; message?: string };
      note(e.errorReason ? `${e.errorReason}${e.errorMessage ? `: ${e.errorMessage}` : ''}` : String(e.message ?? err));
      throw err;
    }
  }
  async getSupported(): Promise<SupportedResponse> {
    return this.facilitators[0]!.getSupported() as SupportedResponse;
  }
}

/** The reference stack: @x402/express middleware in front of GET /paid, settled by x402Facilitator over ExactEvmScheme. */
async function startReference(rpcUrl: string, payTo: Address, relayerKeys: Hex[]): Promise<{ url: string; failures: Map<string, number>; stop: () => Promise<void> }> {
  const facilitators = relayerKeys.map((key) => {
    const wallet = createWalletClient({ account: privateKeyToAccount(key), chain: base, transport: http(rpcUrl), pollingInterval: 250 }).extend(publicActions);
    // viem's verifyTypedData overloads are wider than the signer type spells them; the call shape is the same
    // receipt waits bounded below the buyer's timeout (the default is 180 s): a transaction that
    // never mines is a failed settle here, and the run does not linger on it after the section ends
    const signer = toFacilitatorEvmSigner(Object.assign(wallet, { address: wallet.account.address }) as unknown as Parameters<typeof toFacilitatorEvmSigner>[0], {
      confirmationTimeoutMs: REQUEST_TIMEOUT_MS - 5_000,
    });
    return new x402Facilitator().register(NETWORK, new ExactEvmFacilitator(signer));
  });
  const facilitatorClient = new InProcessFacilitatorClient(facilitators);
  const resourceServer = new x402ResourceServer(facilitatorClient).register(NETWORK, new ExactEvmServer());
  const app = express();
  app.use(
    paymentMiddleware(
      { 'GET /paid': { accepts: { scheme: 'exact', price: `$${PRICE_USD}`, network: NETWORK, payTo, maxTimeoutSeconds: 120 }, description: 'bench' } },
      resourceServer,
    ),
  );
  app.get('/paid', (_req, res) => {
    res.json({ ok: true });
  });
  const { server, url } = await listen(app);
  return { url, failures: facilitatorClient.failures, stop: () => close(server) };
}

/** An @x402/fetch buyer: pays each 402 with an EIP-3009 authorization signed by `account`. */
function referenceBuyer(account: PrivateKeyAccount) {
  const client = new x402Client().register(NETWORK, new ExactEvmClient(account));
  return wrapFetchWithPayment(timedFetch, client);
}

type Shop = { base: string; payTo: Address };

async function json(url: string, body: unknown, key?: string): Promise<{ status: number; body: any }> {
  const res = await timedFetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** A published merchant receiving x402 on `chain` with one product at PRICE_USD and a policy that lets every agent through. */
async function publishShop(baseUrl: string, secret: string, chain: 'base' | 'base-sepolia', payTo: Address): Promise<Shop> {
  const slug = `bench-${ulid().toLowerCase().slice(-10)}`;
  const receiving: Record<string, unknown> = { x402: { chain, address: payTo } };
  const m = await json(`${baseUrl}/v1/merchants`, { slug, name: 'Bench Shop', domain: `${slug}.example.com`, receiving }, secret);
  if (m.status !== 201) throw new Error(`merchant: ${m.status} ${JSON.stringify(m.body)}`);
  const q = `?merchant_id=${m.body.id}`;
  const p = await json(
    `${baseUrl}/v1/catalog${q}`,
    { sku: 'bench', name: 'Bench item', price: { amount: PRICE_USD, currency: 'USD' }, available: true, category: 'bench' },
    secret,
  );
  if (p.status !== 201) throw new Error(`product: ${p.status} ${JSON.stringify(p.body)}`);
  const policy = { requireMandateOverUsd: null, minReputationTier: null, holdForReviewBelowTier: null };
  const pol = await timedFetch(`${baseUrl}/v1/policy${q}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${secret}` },
    body: JSON.stringify({ body: policy }),
  });
  if (pol.status !== 201) throw new Error(`policy: ${pol.status} ${await pol.text()}`);
  const pub = await json(`${baseUrl}/v1/publish${q}`, {}, secret);
  if (pub.status !== 200) throw new Error(`publish: ${pub.status} ${JSON.stringify(pub.body)}`);
  return { base: `${baseUrl}/m/${m.body.id}`, payTo };
}

/** A signed EIP-3009 authorization paying the shop's price, valid for 10 minutes (settle body `payment`). */
async function presign(account: PrivateKeyAccount, payTo: Address, chain: ChainName) {
  const c = CHAINS[chain];
  const now = Math.floor(Date.now() / 1000);
  const authorization = {
    from: account.address,
    to: payTo,
    value: PRICE_BASE_UNITS.toString(),
    validAfter: now - 600,
    validBefore: now + 600,
    nonce: `0x${randomBytes(32).toString('hex')}` as Hex,
  };
  const signature = await account.signTypedData({
    domain: { name: c.domainName, version: c.domainVersion, chainId: c.chainId, verifyingContract: c.usdc as Address },
    types: TRANSFER_WITH_AUTHORIZATION_TYPES,
    primaryType: 'TransferWithAuthorization',
    message: { ...authorization, validAfter: BigInt(authorization.validAfter), validBefore: BigInt(authorization.validBefore), value: PRICE_BASE_UNITS },
  });
  return { payment: { scheme: 'x402-exact', authorization, signature } };
}

/** Our side of a cell: each buyer opens a checkout session and settles it with a pre-signed authorization. */
async function ourCell(shop: Shop, n: number, buyers: PrivateKeyAccount[], chain: ChainName): Promise<CellResult> {
  const per = Math.ceil(n / buyers.length);
  const payments = await Promise.all(buyers.map((b) => Promise.all(Array.from({ length: per }, () => presign(b, shop.payTo, chain)))));
  return runCell(n, buyers.length, async (b, i) => {
    const created = await json(`${shop.base}/agent/checkout`, { agent_id: randomUUID(), items: [{ sku: 'bench', qty: 1 }] });
    if (created.status !== 201) return { ok: false, status: created.status };
    const pr = created.body.payment_required;
    if (pr?.amountBaseUnits !== PRICE_BASE_UNITS.toString() || pr?.payTo?.toLowerCase() !== shop.payTo.toLowerCase()) {
      throw new Error(`unexpected payment_required ${JSON.stringify(pr)}`);
    }
    const settled = await json(`${shop.base}/agent/checkout/${created.body.session_id}/settle`, payments[b]![i]);
    return { ok: settled.status === 200, status: settled.status };
  });
}

async function referenceCell(url: string, n: number, buyers: PrivateKeyAccount[]): Promise<CellResult> {
  const fetchers = buyers.map(referenceBuyer);
  return runCell(n, buyers.length, async (b) => {
    const res = await fetchers[b]!(`${url}/paid`);
    await res.arrayBuffer();
    return { ok: res.status === 200, status: res.status };
  });
}

const ms = (x: number) => (Number.isFinite(x) ? `${Math.round(x)}` : '-');
const ratio = (a: number, b: number) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? `${(a / b).toFixed(2)}x` : '-');

type Row = { mode: string; relayers: number; buyers: number; ours: CellResult; ref: CellResult; rpc?: { ours: string; ref: string } };

function table(rows: Row[]): string {
  const head = ['chain', 'relayers', 'buyers', 'n', 'ours/s', 'ref/s', 'ratio', 'ours p50', 'ref p50', 'ratio', 'ours p99', 'ref p99', 'ratio', 'ours failed', 'ref failed', 'cpu ms/req ours', 'ref', 'anvil ours', 'ref'];
  const body = rows.map((r) => [
    r.mode,
    String(r.relayers),
    String(r.buyers),
    String(r.ours.n),
    r.ours.perSec.toFixed(1),
    r.ref.perSec.toFixed(1),
    ratio(r.ours.perSec, r.ref.perSec),
    ms(r.ours.p50),
    ms(r.ref.p50),
    ratio(r.ours.p50, r.ref.p50),
    ms(r.ours.p99),
    ms(r.ref.p99),
    ratio(r.ours.p99, r.ref.p99),
    failures(r.ours),
    failures(r.ref),
    perReq(r.ours.cpuMs, r.ours),
    perReq(r.ref.cpuMs, r.ref),
    perReq(r.ours.anvilCpuMs, r.ours),
    perReq(r.ref.anvilCpuMs, r.ref),
  ]);
  if (rows.some((r) => r.rpc)) {
    head.push('rpc/req ours', 'ref');
    rows.forEach((r, i) => body[i]!.push(r.rpc?.ours ?? '-', r.rpc?.ref ?? '-'));
  }
  const widths = head.map((h, i) => Math.max(h.length, ...body.map((row) => row[i]!.length)));
  const line = (cells: string[]) => '  ' + cells.map((c, i) => c.padStart(widths[i]!)).join('  ');
  return [line(head), ...body.map(line)].join('\n');
}

/** JSON-RPC calls per paid request, in all and by method (the most frequent first). */
function rpcPerReq(c: RpcCounter, n: number): string {
  const per = (k: number) => (k / n).toFixed(2).replace(/\.?0+$/, '');
  const methods = [...c.counts].sort((a, b) => b[1] - a[1]).map(([m, k]) => `${m.replace(/^eth_/, '')} ${per(k)}`);
  return `${per(c.total())} (${methods.join(', ')})`;
}

const perReq = (cpuMs: number, c: CellResult) => (c.n ? (cpuMs / c.n).toFixed(1) : '-');
const failures = (c: CellResult) => (c.failed === 0 ? '0' : `${c.failed} (${Object.entries(c.statuses).map(([s, k]) => `${s === '0' ? 'error' : s}x${k}`).join(' ')})`);

/**
 * Live settles on a local anvil (chain id 8453, the EIP-3009 test token at the Base USDC
 * address), ours (checkout + settle through the settlement engine and the `onchain` relayer
 * facilitator, built from SVC_LIVE_FACILITATOR=onchain as the server builds it) beside the x402 reference stack (@x402/express + x402Facilitator + @x402/fetch
 * buyers) in the same process on the same chain, cell by cell. Then test mode's mock settles.
 * Only 127.0.0.1; every request is bounded by REQUEST_TIMEOUT_MS.
 */
export async function benchLive(opts: LiveBenchOptions = {}): Promise<string> {
  const buyerCounts = opts.buyers ?? [1, 4, 16];
  const relayerCounts = opts.relayers ?? [1, 4];
  const blockTimes = opts.blockTimes ?? [0, 1];
  const perCell = opts.requestsPerCell ?? ((b: number) => (b === 1 ? 6 : Math.max(16, 4 * b)));
  const started = performance.now();

  const adminUrl = process.env.DATABASE_URL;
  let target: DbTarget = { kind: 'pglite', dataDir: null };
  let dropDb = async () => undefined as void;
  if (adminUrl) {
    const scratch = await createScratchDatabase(adminUrl, 'svc_bench', 20);
    target = scratch.target;
    dropDb = scratch.drop;
  }
  const env = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    SVC_DATA_DIR: join(tmpdir(), `svc-bench-${ulid()}`),
    SVC_CHECKOUT_RATE_PER_MINUTE: '100000',
  };
  const config = loadConfig(env);
  const services: Services = await createServices(config, { target, log: silent });
  const { server, url } = await listen(buildApp(services) as unknown as express.Express);
  const lines: string[] = [];
  const rows: Row[] = [];
  const refReasons = new Map<string, number>();
  let anvil: Anvil | null = null;
  const liveFacilitator = services.facilitators.live;
  try {
    const em = services.orm.em.fork();
    const project = await createProject(em, 'bench-live', { now: services.now() });
    const liveKey = await createApiKey(em, { projectId: project.id, mode: 'live', scopes: [...SCOPES], now: services.now() });
    const testKey = await createApiKey(em, { projectId: project.id, mode: 'test', scopes: [...SCOPES], now: services.now() });

    let refBaseline: CellResult | null = null;
    for (const blockTime of blockTimes) {
      const mode = blockTime === 0 ? 'automine' : `block ${blockTime}s`;
      anvil = await startAnvil(blockTime === 0 ? {} : { blockTime });
      anvilPid = anvil.pid;
      const ourPayTo = privateKeyToAccount(generatePrivateKey()).address;
      const refPayTo = privateKeyToAccount(generatePrivateKey()).address;
      const shop = await publishShop(url, liveKey.secret, 'base', ourPayTo);

      const plan = relayerCounts.flatMap((relayers) => buyerCounts.map((buyers) => ({ relayers, buyers })));
      const accounts = plan.map((c) => ({
        ours: Array.from({ length: c.buyers }, () => privateKeyToAccount(generatePrivateKey())),
        ref: Array.from({ length: c.buyers }, () => privateKeyToAccount(generatePrivateKey())),
      }));
      await fund(
        anvil,
        accounts.flatMap((a) => [...a.ours, ...a.ref].map((x) => x.address)),
        100_000_000n,
      );

      for (const relayers of relayerCounts) {
        const counters = opts.countRpc ? { ours: await countingRpcProxy(anvil.rpcUrl), ref: await countingRpcProxy(anvil.rpcUrl) } : null;
        const ourKeys = Array.from({ length: relayers }, () => generatePrivateKey());
        const refKeys = Array.from({ length: relayers }, () => generatePrivateKey());
        for (const k of [...ourKeys, ...refKeys]) await anvil.setEthBalance(privateKeyToAccount(k).address, 10n ** 20n);
        // the live facilitator exactly as the server builds it from its environment
        const ours = createLiveFacilitator(
          loadConfig({ ...env, SVC_LIVE_FACILITATOR: 'onchain', SVC_RPC_URL_BASE: counters?.ours.url ?? anvil.rpcUrl, SVC_RELAYER_PRIVATE_KEYS: ourKeys.join(',') }),
          silent,
          // signer recovery on the server's worker threads, as boot.ts wires it
          services.signers,
        );
        if (ours.name !== 'onchain') throw new Error(`expected the onchain facilitator, got ${ours.name}`);
        services.facilitators.live = ours;
        const ref = await startReference(counters?.ref.url ?? anvil.rpcUrl, refPayTo, refKeys);
        try {
          for (const buyers of buyerCounts) {
            const a = accounts[plan.findIndex((c) => c.relayers === relayers && c.buyers === buyers)]!;
            const n = perCell(buyers);
            // ABAB: each side runs half its requests, twice, so a change in the machine's load
            // in the middle of a cell falls on both sides
            const half = Math.ceil(n / 2);
            counters?.ours.reset();
            counters?.ref.reset();
            const r1 = await referenceCell(ref.url, half, a.ref);
            const o1 = await ourCell(shop, half, a.ours, 'base');
            const refResult = merge(r1, await referenceCell(ref.url, n - half, a.ref));
            const ourResult = merge(o1, await ourCell(shop, n - half, a.ours, 'base'));
            const rpc = counters ? { ours: rpcPerReq(counters.ours, ourResult.n), ref: rpcPerReq(counters.ref, refResult.n) } : undefined;
            for (const [why, k] of ref.failures) {
              const short = why.replace(/\s+/g, ' ').slice(0, 120);
              refReasons.set(short, (refReasons.get(short) ?? 0) + k);
            }
            ref.failures.clear();
            rows.push({ mode, relayers, buyers, ours: ourResult, ref: refResult, rpc });
            if (blockTime === 0 && buyers === Math.max(...buyerCounts) && relayers === Math.max(...relayerCounts)) refBaseline = refResult;
          }
        } finally {
          await ref.stop();
          services.facilitators.live = liveFacilitator;
          await ours.close();
          await counters?.ours.close();
          await counters?.ref.close();
        }
      }
      await anvil.stop();
      anvil = null;
    }
    lines.push(
      `live (anvil, chain 8453; ours = checkout + settle through the engine and the onchain relayer facilitator; ref = @x402/express + x402Facilitator + @x402/fetch; ` +
        `settles/s counts 200s; p50/p99 in ms over the 200s, each from the buyer's first request to its answer; ratio = ours / ref in the same cell, ` +
        `so above 1 is better for settles/s and worse for latency; failed = answers other than 200; cpu ms/req = CPU time per paid request of this process (server, buyers and reference all run in it) and of anvil):`,
    );
    lines.push(table(rows));
    if (refReasons.size) lines.push(`  ref settle failures by reason: ${[...refReasons].map(([why, k]) => `${k}x ${why}`).join('; ')}`);

    // test mode: x402 on the mock facilitator (signature checked in process, no chain)
    const agents = opts.mockAgents ?? 16;
    const mockN = opts.mockSettles ?? 96;
    const testShop = await publishShop(url, testKey.secret, 'base-sepolia', privateKeyToAccount(generatePrivateKey()).address);
    const mockBuyers = Array.from({ length: agents }, () => privateKeyToAccount(generatePrivateKey()));
    const mock = await ourCell(testShop, mockN, mockBuyers, 'base-sepolia');
    const vs = refBaseline ? ` = ${ratio(mock.perSec, refBaseline.perSec)} the reference's live automine ${refBaseline.perSec.toFixed(1)}/s at ${Math.max(...buyerCounts)} buyers, ${Math.max(...relayerCounts)} relayers` : '';
    lines.push(
      `  test mode (mock facilitator), ${agents} agents, ${mock.n} checkout+settle: ${mock.perSec.toFixed(1)} settles/s${vs}; p50 ${ms(mock.p50)} ms, p99 ${ms(mock.p99)} ms, failed ${failures(mock)}, cpu ms/req ${perReq(mock.cpuMs, mock)} (this process)`,
    );
    lines.push(`  live section took ${((performance.now() - started) / 1000).toFixed(1)} s (${target.kind === 'postgres' ? 'postgresql' : 'pglite (in memory)'})`);
    return lines.join('\n');
  } finally {
    if (anvil) await anvil.stop();
    await close(server);
    await services.orm.close(true);
    await dropDb();
  }
}
