import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generatePrivateKey } from 'viem/accounts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createScratchDatabase } from '../src/db/scratch.js';
import { onPostgres } from './helpers/foundation.js';
import { CLI, freePort, ROOT, runCommand, runScript, TSX } from './helpers/spawn.js';

/**
 * Runs the README's code blocks that are meant to run, as written: each is marked by the HTML
 * comment `<!-- readme-test: <group> <run|serve> -->` on the line before its fence. `live` blocks
 * are the local-chain walk-through ("Try live mode on a local chain"); its `serve` blocks
 * (`npm run chain`, the live `npm start`) keep running, and the `test` blocks run against that
 * same server (test mode needs no chain), so one chain and one server serve the whole file.
 * `sh` blocks run in bash (`set -e`), `ts` blocks with tsx from the repository root.
 *
 * State between the blocks of one group (the walk-through's `KEY`, `MERCHANT`, `SESSION`, …):
 * each block runs in its own bash, which first sources the group's env file and runs with
 * `set -a` (every assignment is exported), then writes `export -p` back to that file; so a
 * variable set by one block is there in the next ones, as in the reader's one terminal. A `ts`
 * block gets the same variables. After a block, a variable it left empty or `null` (a `jq -r`
 * of a field the answer lacked) fails it.
 *
 * What a block prints is checked by one rule: when its comments show an error answer
 * (`"reason_codes":[…]`), its output must carry exactly those codes; otherwise its output must
 * carry no `"reason_codes"` at all (`curl -s` exits 0 on a 4xx, so this is what catches one).
 *
 * The only rewrites are where the README names a machine's fixed ports: localhost:3000 (the
 * server's default) and 127.0.0.1:8545 (the chain's) become free ports, told to the commands
 * through PORT and `npm run chain -- --port`.
 */

type Block = { group: string; kind: 'run' | 'serve'; lang: string; code: string; line: number };

const README = readFileSync(join(ROOT, 'README.md'), 'utf8');

function markedBlocks(text: string): Block[] {
  const out: Block[] = [];
  const re = /<!-- readme-test: (\w+) (run|serve) -->\n```(\w+)\n([\s\S]*?)\n```/g;
  for (let m = re.exec(text); m; m = re.exec(text)) {
    out.push({ group: m[1]!, kind: m[2] as Block['kind'], lang: m[3]!, code: m[4]!, line: text.slice(0, m.index).split('\n').length + 1 });
  }
  return out;
}

const blocks = markedBlocks(README);
const TIMEOUT = 240_000;

let port: number;
let chainPort: number;
let env: Record<string, string | undefined>;
const dataDir = mkdtempSync(join(tmpdir(), 'svc-readme-'));
let dropDatabase = async () => undefined as void;
const serving: { block: Block; proc: ChildProcess; output: () => string }[] = [];

const asWritten = (code: string) =>
  code
    .replaceAll('localhost:3000', `localhost:${port}`)
    .replaceAll('127.0.0.1:8545', `127.0.0.1:${chainPort}`)
    .replace(/^npm run chain$/m, `npm run chain -- --port ${chainPort}`);

/** The group's env file: the variables its blocks set so far (see the header). */
const stateFile = (group: string) => join(dataDir, `readme-${group}.env`);
const sourceState = (group: string) => `set -a; if [ -f '${stateFile(group)}' ]; then . '${stateFile(group)}'; fi\n`;

/** Runs one `run` block to completion; its exit status must be 0. */
async function runBlock(block: Block, extraEnv: Record<string, string> = {}) {
  const code = asWritten(block.code);
  const state = stateFile(block.group);
  let r;
  if (block.lang === 'sh') {
    r = await runCommand('bash', ['-ec', `${sourceState(block.group)}${code}\nexport -p > '${state}'`], { env: { ...env, ...extraEnv }, timeoutMs: TIMEOUT });
  } else {
    // In the repository (its node_modules resolve the imports), removed afterwards.
    const file = join(ROOT, `.readme-block-${block.line}.ts`);
    writeFileSync(file, code);
    try {
      r = await runCommand('bash', ['-ec', `${sourceState(block.group)}exec '${process.execPath}' '${TSX}' '${file}'`], { env: { ...env, ...extraEnv }, timeoutMs: TIMEOUT });
    } finally {
      rmSync(file, { force: true });
    }
  }
  const what = `README line ${block.line}:\n${code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}`;
  expect(r.code, what).toBe(0);
  if (block.lang === 'sh') {
    // The variables this block assigned and kept (a command's prefix assignment is not kept): none may be empty or "null".
    const assigned = [...code.matchAll(/^(?:export )?([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1]!);
    const vars = await runCommand('bash', ['-ec', `${sourceState(block.group)}for v in ${assigned.join(' ') || ':'}; do [ "$v" = : ] || ! declare -p "$v" >/dev/null 2>&1 || echo "$v=\${!v}"; done`], { env, timeoutMs: TIMEOUT });
    for (const line of vars.stdout.trim().split('\n').filter(Boolean)) expect(line, what).not.toMatch(/^\w+=(null)?$/);
  }
  const shown = [...code.matchAll(/^#.*?("reason_codes":\[[^\]]*\])/gm)].map((m) => m[1]!);
  if (shown.length) for (const codes of shown) expect(r.stdout, what).toContain(codes);
  else expect(r.stdout, what).not.toContain('"reason_codes"');
  return r;
}

/** Starts a `serve` block in its own process group and waits until it says "listening on". */
async function serve(block: Block) {
  const childEnv = Object.fromEntries(Object.entries({ ...process.env, ...env, LOG_LEVEL: 'info' }).filter(([, v]) => v !== undefined)) as NodeJS.ProcessEnv;
  const proc = spawn('bash', ['-ec', asWritten(block.code)], { cwd: ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  let output = '';
  proc.stdout!.on('data', (b) => (output += b));
  proc.stderr!.on('data', (b) => (output += b));
  serving.push({ block, proc, output: () => output });
  const deadline = Date.now() + TIMEOUT;
  while (!output.includes('listening on')) {
    if (proc.exitCode !== null) throw new Error(`README line ${block.line} exited (${proc.exitCode}):\n${output}`);
    if (Date.now() > deadline) throw new Error(`README line ${block.line} did not start:\n${output}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  return output;
}

beforeAll(async () => {
  port = await freePort();
  chainPort = await freePort();
  let databaseUrl: string | undefined;
  if (onPostgres) {
    const scratch = await createScratchDatabase(process.env.DATABASE_URL!, 'svc_readme');
    databaseUrl = scratch.target.kind === 'postgres' ? scratch.target.url : undefined;
    dropDatabase = scratch.drop;
  }
  // A newcomer's shell: development mode, the default public URL (http://localhost:$PORT).
  env = {
    PORT: String(port),
    SVC_DATA_DIR: dataDir,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
    DATABASE_URL: databaseUrl,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    SVC_PUBLIC_BASE_URL: undefined,
    SVC_LIVE_FACILITATOR: undefined,
  };
}, TIMEOUT);

afterAll(async () => {
  // Each serve block's own process group, newest first (the server before the chain it uses).
  for (const s of serving.reverse()) {
    if (s.proc.exitCode !== null || s.proc.pid === undefined) continue;
    const exited = new Promise((r) => s.proc.once('exit', r));
    process.kill(-s.proc.pid, 'SIGINT');
    const killer = setTimeout(() => s.proc.exitCode === null && process.kill(-s.proc.pid!, 'SIGKILL'), 15_000);
    await exited;
    clearTimeout(killer);
  }
  rmSync(join(ROOT, 'cookies.txt'), { force: true });
  rmSync(join(ROOT, 'settled.json'), { force: true });
  rmSync(dataDir, { recursive: true, force: true });
  await dropDatabase();
}, TIMEOUT);

describe('the README runs as written', () => {
  it('GIVEN the README THEN it marks the live local-chain walk-through (two serve blocks, then the purchase), the merchant walk-through, the API-key examples and the test-mode SDK and x402 examples', () => {
    expect(blocks.filter((b) => b.group === 'live').map((b) => b.kind)).toEqual(['serve', 'serve', 'run']);
    expect(blocks.filter((b) => b.group === 'test').length).toBeGreaterThanOrEqual(2);
    expect(blocks.every((b) => b.lang === 'sh' || b.lang === 'ts')).toBe(true);
    // At most five commands from a clone to a live purchase.
    const commands = blocks.filter((b) => b.group === 'live').flatMap((b) => b.code.split('\n').filter((l) => l.trim() && !l.startsWith('#')));
    expect(commands.length).toBeLessThanOrEqual(5);
  });

  it('GIVEN `npm run chain` and the live `npm start` as written WHEN they start THEN the chain prints the server variables and the buyer key the README uses, and the server is ready with live mode ok', async () => {
    const [chain, server] = blocks.filter((b) => b.group === 'live' && b.kind === 'serve');
    const printed = await serve(chain!);
    // The server command the README shows is the one the chain prints (with its port).
    expect(printed).toContain(asWritten(server!.code));
    const live = blocks.find((b) => b.group === 'live' && b.kind === 'run')!;
    const buyerKey = /SVC_AGENT_PRIVATE_KEY=(0x[0-9a-f]{64})/.exec(live.code)![1]!;
    expect(printed).toMatch(new RegExp(`buyer .*100 USDC .*key ${buyerKey}`));
    await serve(server!);
    const ready = (await (await fetch(`http://localhost:${port}/readyz`)).json()) as { live?: { ok: boolean; facilitator: string } };
    expect(ready.live).toMatchObject({ ok: true, facilitator: 'onchain' });
  }, TIMEOUT);

  it('GIVEN the running server and a fresh installation WHEN the walk-through\'s blocks run in order in one shell environment THEN each exits 0 and answers what the README shows (errors only where it shows them)', async () => {
    const walk = blocks.filter((b) => b.group === 'walk');
    // Key, me, merchant, wrong chain, product, wrong price, policy, validate, publish, policy, jwks,
    // manifest, checkout, settle, orders, MCP, feed and summary, refund refused, 401.
    expect(walk.length).toBeGreaterThanOrEqual(19);
    const out: string[] = [];
    for (const block of walk) out.push((await runBlock(block)).stdout);
    const text = out.join('\n');
    expect(text).toMatch(/^mrch_[0-9a-z]{26}$/m);
    expect(text).toContain('"name":"Acme Data"');
    expect(text).toContain('{"ok":true,"findings":[]}');
    expect(text).toContain('"published":true');
    expect(text).toMatch(/"status":"accepted","order_id":"ord_[0-9a-z]{26}"/);
    expect(text).toContain('"accepted_volume":"4.99"');
  }, TIMEOUT * 4);

  it('GIVEN the running server WHEN the CLI and key blocks of "Your first API key" run in order THEN each exits 0', async () => {
    const keys = blocks.filter((b) => b.group === 'keys');
    expect(keys.length).toBe(3);
    const out: string[] = [];
    for (const block of keys) out.push((await runBlock(block)).stdout);
    expect(out.join('\n')).toMatch(/revoked key_[0-9a-z]{26}/);
  }, TIMEOUT * 4);

  it('GIVEN the running server WHEN the test-mode blocks run in order (curl sign-in with Origin; the Merchants SDK block making `coffee` with a 2.80 espresso; the agent SDK, the AP2 mandate example and the x402 client buying it) THEN each exits 0 and does what it says', async () => {
    const [signIn, merchantKey, merchants, agent, ap2, x402] = blocks.filter((b) => b.group === 'test');
    expect([signIn, merchantKey, merchants, agent, ap2, x402].map((b) => b?.lang)).toEqual(['sh', 'sh', 'ts', 'ts', 'ts', 'ts']);
    const signedIn = await runBlock(signIn!);
    expect(signedIn.stdout).toMatch(/^303\n\{.*"id":"mrch_[0-9a-z]{26}".*\}$/);
    expect(signedIn.stdout).toContain('"slug":"cookie-shop"');
    await runBlock(merchantKey!);
    expect((await runBlock(merchants!)).stdout).toMatch(/^mrch_[0-9a-z]{26} 0 \d+ 0 1\n$/m);
    const bought = await runBlock(agent!, { AGENT_KEY: generatePrivateKey() });
    expect(bought.stdout).toMatch(/^ord_[0-9a-z]{26} \S+\n$/); // receipt.orderId, receipt.settlementRef
    const mandated = await runBlock(ap2!, { AGENT_KEY: generatePrivateKey() });
    expect(mandated.stdout).toMatch(/^accepted ord_[0-9a-z]{26}\n$/);
    const paid = await runBlock(x402!, { AGENT_KEY: generatePrivateKey() });
    expect(paid.stdout).toMatch(/^ord_[0-9a-z]{26} \S+\n$/);
  }, TIMEOUT);

  it('GIVEN the chain and the live server WHEN the live purchase runs as written THEN the order is accepted on chain and `svc dev balance` shows 18 USDC moved from the buyer to the merchant', async () => {
    const live = blocks.find((b) => b.group === 'live' && b.kind === 'run')!;
    const r = await runBlock(live);
    expect(r.stdout).toMatch(/accepted: order ord_[0-9a-z]{26}, settlement 0x[0-9a-f]{64}/);
    const balances = r.stdout.trim().split('\n').slice(-2);
    expect(balances).toEqual([
      '0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC  82 USDC  10000 ETH',
      '0x90F79bf6EB2c4f870365E785982E1f101E93b906  18 USDC  10000 ETH',
    ]);
    // The order is the live merchant's, in live mode.
    const orders = await runCommand('bash', ['-ec', `curl -s localhost:${port}/v1/orders -H "Authorization: Bearer $(npm run --silent svc -- keys create --mode live | head -1)"`], { env, timeoutMs: TIMEOUT });
    const feed = JSON.parse(orders.stdout) as { data: { rail_name: string; total: { total: string } }[] };
    expect(feed.data).toEqual([expect.objectContaining({ rail_name: 'x402', total: expect.objectContaining({ total: '18.00' }) })]);
  }, TIMEOUT);

  it('GIVEN `svc dev balance` with a bad address or no chain THEN exit status and one line say so', async () => {
    const bad = await runScript(CLI, ['dev', 'balance', '0x12'], env);
    expect(bad.code).toBe(2);
    expect(bad.stderr.trim()).toBe('dev balance needs 0x-prefixed 20-byte addresses, got 0x12');
    const noChain = await runScript(CLI, ['dev', 'balance', '0x90F79bf6EB2c4f870365E785982E1f101E93b906', '--rpc', 'http://127.0.0.1:9'], env);
    expect(noChain.code).toBe(1);
    expect(noChain.stderr).toContain('cannot read balances from http://127.0.0.1:9 (is `npm run chain` running?');
  }, TIMEOUT);
});
