/**
 * `npm run examples`: runs the three examples end to end against a real server on an
 * embedded database, and exits 0 only if all of them did what they say.
 *
 * 1. mints a test key with the CLI on a fresh data directory (before the server starts:
 *    the embedded PGlite database is single-process),
 * 2. starts the server on a free port (webhook worker inside, retry delays scaled down),
 * 3. merchant-quickstart.ts creates a merchant, products and a policy, and registers the
 *    receiver's URL as a webhook endpoint,
 * 4. webhook-receiver.ts starts with that endpoint's secret,
 * 5. agent-buy.ts discovers the shop, buys, verifies the receipt,
 * 6. the receiver must get the purchase's order.settled with a valid signature, and must
 *    flag the same event as a duplicate when it is replayed.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MerchantClient } from '@svc/sdk/merchant';

const ROOT = resolve(fileURLToPath(new URL('..', import.meta.url)));
const STEP_TIMEOUT_MS = 120_000;

function log(line: string) {
  process.stdout.write(`[examples] ${line}\n`);
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once('error', rej);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => res(port));
    });
  });
}

/** A child process running a TypeScript file with tsx, its stdout split into lines. */
class Child {
  readonly lines: string[] = [];
  private waiters: Array<() => void> = [];
  readonly proc: ChildProcess;
  exitCode: number | null = null;
  private exited: Promise<number>;

  constructor(
    readonly name: string,
    file: string,
    args: string[],
    env: NodeJS.ProcessEnv,
  ) {
    this.proc = spawn(process.execPath, ['--import', 'tsx', file, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.proc.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        this.lines.push(line);
        process.stdout.write(`  [${name}] ${line}\n`);
        for (const w of this.waiters.splice(0)) w();
      }
    });
    this.proc.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
      for (const line of chunk.split('\n')) if (line.trim()) process.stdout.write(`  [${name}!] ${line}\n`);
    });
    this.exited = new Promise((res) => {
      this.proc.on('exit', (code, signal) => {
        this.exitCode = code ?? (signal ? 128 : 1);
        for (const w of this.waiters.splice(0)) w();
        res(this.exitCode);
      });
    });
  }

  /** Resolves with the first stdout line (old or new) for which `match` returns a value. */
  async waitForLine<T>(match: (line: string) => T | undefined, what: string, timeoutMs = STEP_TIMEOUT_MS): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    let checked = 0;
    for (;;) {
      for (; checked < this.lines.length; checked++) {
        const hit = match(this.lines[checked]!);
        if (hit !== undefined) return hit;
      }
      if (this.exitCode !== null) throw new Error(`${this.name} exited (${this.exitCode}) before ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what} from ${this.name}`);
      await new Promise<void>((res) => {
        const t = setTimeout(res, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(t);
          res();
        });
      });
    }
  }

  async done(timeoutMs = STEP_TIMEOUT_MS): Promise<number> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, rej) => {
      timer = setTimeout(() => rej(new Error(`${this.name} did not finish in ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      return await Promise.race([this.exited, timeout]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** SIGTERM, then SIGKILL if it has not exited after 5 s. Only this child's own pid. */
  async stop(): Promise<void> {
    if (this.exitCode !== null || this.proc.pid === undefined) return;
    this.proc.kill('SIGTERM');
    const killer = setTimeout(() => this.proc.kill('SIGKILL'), 5000);
    await this.exited;
    clearTimeout(killer);
  }
}

function jsonLine<T>(line: string): T | undefined {
  if (!line.startsWith('{')) return undefined;
  try {
    return JSON.parse(line) as T;
  } catch {
    return undefined;
  }
}

async function run(name: string, file: string, env: NodeJS.ProcessEnv): Promise<string[]> {
  const child = new Child(name, file, [], env);
  const code = await child.done();
  if (code !== 0) throw new Error(`${name} exited with ${code}`);
  return child.lines;
}

async function main() {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-examples-'));
  const { DATABASE_URL: _external, ...inherited } = process.env;
  const base: NodeJS.ProcessEnv = {
    ...inherited,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    SVC_DATA_DIR: dataDir,
    SVC_MASTER_KEY: randomBytes(32).toString('hex'),
  };
  const children: Child[] = [];
  try {
    log(`embedded database in ${dataDir}`);
    const cli = new Child('cli', 'server/src/cli.ts', ['keys', 'create', '--mode', 'test', '--json'], base);
    if ((await cli.done()) !== 0) throw new Error('keys create failed');
    const key = cli.lines.map((l) => jsonLine<{ secret: string }>(l)).find((k) => k?.secret)?.secret;
    if (!key) throw new Error('keys create printed no secret');
    log('minted a test key with the CLI');

    const port = await freePort();
    const baseUrl = `http://127.0.0.1:${port}`;
    const server = new Child('server', 'server/src/main.ts', [], {
      ...base,
      PORT: String(port),
      HOST: '127.0.0.1',
      SVC_PUBLIC_BASE_URL: baseUrl,
      SVC_WEBHOOK_RETRY_SCALE: '0.001',
    });
    children.push(server);
    const deadline = Date.now() + STEP_TIMEOUT_MS;
    for (;;) {
      if (server.exitCode !== null) throw new Error(`the server exited with ${server.exitCode}`);
      const ready = await fetch(`${baseUrl}/readyz`).then((r) => r.ok, () => false);
      if (ready) break;
      if (Date.now() > deadline) throw new Error('the server did not become ready');
      await new Promise((r) => setTimeout(r, 250));
    }
    log(`server ready at ${baseUrl}`);

    const receiverPort = await freePort();
    const common = { ...base, SVC_BASE_URL: baseUrl, SVC_API_KEY: key };
    const quick = await run('merchant-quickstart', 'examples/merchant-quickstart.ts', { ...common, SVC_WEBHOOK_URL: `http://127.0.0.1:${receiverPort}/webhooks` });
    const setup = jsonLine<{ merchant_id: string; agent_url: string; webhook_secret: string }>(quick.at(-1) ?? '');
    if (!setup?.webhook_secret) throw new Error('merchant-quickstart printed no summary');

    const receiver = new Child('webhook-receiver', 'examples/webhook-receiver.ts', [], { ...base, PORT: String(receiverPort), SVC_WEBHOOK_SECRET: setup.webhook_secret });
    children.push(receiver);
    await receiver.waitForLine((l) => jsonLine<{ listening?: string }>(l)?.listening, 'the receiver to listen');

    const bought = await run('agent-buy', 'examples/agent-buy.ts', { ...base, SVC_MERCHANT_URL: setup.agent_url });
    const purchase = jsonLine<{ status: string; order_id: string }>(bought.at(-1) ?? '');
    if (purchase?.status !== 'accepted') throw new Error(`agent-buy did not buy: ${bought.at(-1)}`);

    type Received = { received?: string; event_id: string; order_id: string; duplicate: boolean };
    const settled = await receiver.waitForLine((l) => {
      const r = jsonLine<Received>(l);
      return r?.received === 'order.settled' && r.order_id === purchase.order_id && !r.duplicate ? r : undefined;
    }, `order.settled for ${purchase.order_id}`);
    log(`the receiver verified and accepted order.settled ${settled.event_id} for ${purchase.order_id}`);

    const svc = new MerchantClient({ apiKey: key, baseUrl });
    await svc.webhooks.events.replay(settled.event_id);
    await receiver.waitForLine((l) => {
      const r = jsonLine<Received>(l);
      return r?.event_id === settled.event_id && r.duplicate ? r : undefined;
    }, `the replayed ${settled.event_id} flagged as a duplicate`);
    log('the replayed event was recognised as a duplicate');
    log('all examples passed');
  } finally {
    for (const c of children.reverse()) await c.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    log(`FAILED: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  },
);
