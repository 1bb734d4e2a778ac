import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createScratchDatabase } from '../../src/db/scratch.js';
import { ulid } from 'ulid';
import { SCOPES, type Scope } from '@svc/contract';
import { buildApp } from '../../src/app.js';
import { createHttpServer } from '../../src/http/transport-errors.js';
import { closeServices, createServices } from '../../src/boot.js';
import { loadConfig, type Config } from '../../src/config.js';
import type { DbTarget } from '../../src/db/orm.js';
import { createApiKey, createProject } from '../../src/modules/accounts/service.js';
import type { Services } from '../../src/services.js';
import type { Logger } from '../../src/lib/logger.js';
import { checkResponseAgainstOpenApi } from './openapi-responses.js';

export type ApiResponse<T = any> = { status: number; body: T; headers: Headers; text: string };

/** A response body as the helpers hand it over: parsed JSON, the text itself when it is not JSON, undefined when empty. */
export function jsonOrText(text: string): unknown {
  if (text.length === 0) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

export type TestKey = { id: string; secret: string; projectId: string; mode: 'test' | 'live' };

/**
 * One isolated app per test file: its own database (a fresh PostgreSQL database when
 * DATABASE_URL is set, else an embedded PGlite), real HTTP on an ephemeral port.
 */
export class TestApp {
  services!: Services;
  server!: Server;
  baseUrl!: string;
  config!: Config;
  private constructor(
    /** The database this app runs on; pass it to `TestApp.start(env, { target })` to share it. */
    readonly target: DbTarget,
    private readonly cleanup: () => Promise<void>,
    /** A logger to capture the app's logs (tests that read them); the config's level otherwise. */
    private readonly log?: Logger,
  ) {}

  /**
   * `opts.target` reuses another app's database (a second server process on the same
   * PostgreSQL database; pass the same SVC_MASTER_KEY). That database belongs to the first
   * app: stopping this one leaves it in place, so stop this one first.
   */
  static async start(env: Record<string, string> = {}, opts: { persistent?: boolean; target?: DbTarget; log?: Logger } = {}): Promise<TestApp> {
    let target: DbTarget;
    let cleanup: () => Promise<void> = async () => undefined;
    const adminUrl = process.env.DATABASE_URL;
    if (opts.target) {
      target = opts.target;
    } else if (adminUrl) {
      const scratch = await createScratchDatabase(adminUrl, 'svc_t', 20);
      target = scratch.target;
      cleanup = scratch.drop;
    } else if (opts.persistent) {
      const dir = mkdtempSync(join(tmpdir(), 'svc-pglite-'));
      target = { kind: 'pglite', dataDir: dir };
      cleanup = async () => rmSync(dir, { recursive: true, force: true });
    } else {
      target = { kind: 'pglite', dataDir: null };
    }
    const app = new TestApp(target, cleanup, opts.log);
    // The port is known before the configuration is read, so SVC_PUBLIC_BASE_URL (every link the
    // service hands out) names the address the tests reach, as an operator's setting would.
    const port = await app.listen(0);
    app.config = loadConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
      SVC_MASTER_KEY: randomBytes(32).toString('hex'),
      SVC_DATA_DIR: join(tmpdir(), `svc-test-${ulid()}`),
      SVC_PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
      // recovery on the request thread: a worker thread under tsx costs ~1.5 s of CPU per test
      // file; the pool has its own tests (unit/signer-recovery, production) and spawned servers use it
      SVC_SIGNER_THREADS: '0',
      ...env,
    });
    await app.boot();
    return app;
  }

  /** Listens on `port` (0: any free one) before the app exists; requests wait in the socket until boot() attaches it. */
  private async listen(port: number): Promise<number> {
    // Node's transport answers (no Host, CONNECT, bad framing) as the server answers them (http/transport-errors.ts).
    this.server = createHttpServer();
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, '127.0.0.1', () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    const bound = (this.server.address() as AddressInfo).port;
    this.baseUrl = `http://127.0.0.1:${bound}`;
    return bound;
  }

  private async boot() {
    this.services = await createServices(this.config, { target: this.target, ...(this.log ? { log: this.log } : {}) });
    const app = buildApp(this.services, { responseValidation: true });
    this.server.on('request', app);
  }

  /** Stops the HTTP server and closes the database, then boots again on the same data (and the same port, which the configuration names). */
  async restart() {
    await this.shutdown();
    await this.listen(Number(new URL(this.baseUrl).port));
    await this.boot();
  }

  private async shutdown() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    await closeServices(this.services, { force: true });
  }

  async stop() {
    await this.shutdown();
    await this.cleanup();
  }

  /** A new project with a key in the given mode (every scope unless narrowed). */
  async key(mode: 'test' | 'live' = 'test', opts: { scopes?: Scope[]; projectId?: string } = {}): Promise<TestKey> {
    const em = this.services.orm.em.fork();
    const projectId = opts.projectId ?? (await createProject(em, `p-${ulid()}`, { now: this.services.now() })).id;
    const { key, secret } = await createApiKey(em, { projectId, mode, scopes: opts.scopes ?? [...SCOPES], now: this.services.now() });
    return { id: key.id, secret, projectId, mode };
  }

  async request<T = any>(
    method: string,
    path: string,
    opts: {
      key?: TestKey | string;
      body?: unknown;
      rawBody?: string;
      headers?: Record<string, string>;
      /** Only for tests that send what the document cannot describe on purpose. */
      skipOpenApiCheck?: boolean;
    } = {},
  ): Promise<ApiResponse<T>> {
    const headers: Record<string, string> = { ...(opts.headers ?? {}) };
    if (opts.key) headers.authorization = `Bearer ${typeof opts.key === 'string' ? opts.key : opts.key.secret}`;
    let body: string | undefined;
    if (opts.rawBody !== undefined) {
      body = opts.rawBody;
      headers['content-type'] ??= 'application/json';
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    // redirects are answers to check (sign-in's 303), not to follow
    const res = await fetch(this.baseUrl + path, { method, headers, body, redirect: 'manual' });
    const text = await res.text();
    // Every response of the suite is checked against openapi/openapi.json (helpers/openapi-responses.ts).
    if (!opts.skipOpenApiCheck) checkResponseAgainstOpenApi(method, path, res.status, res.headers.get('content-type'), text);
    return { status: res.status, body: jsonOrText(text) as T, headers: res.headers, text };
  }
}

export const TEST_PAY_TO = '0x1111111111111111111111111111111111111111';

export function merchantBody(overrides: Record<string, unknown> = {}) {
  const slug = `shop-${ulid().toLowerCase().slice(-10)}`;
  return {
    slug,
    name: 'Test Shop',
    domain: `${slug}.example.com`,
    receiving: { x402: { chain: 'base-sepolia', address: TEST_PAY_TO }, mock: { account: 'acct_test' } },
    ...overrides,
  };
}

/** The shape every error must have: exactly the two keys. */
export function expectErrorShape(body: unknown): asserts body is { reason_codes: string[]; error_human: string } {
  const b = body as Record<string, unknown>;
  if (!b || typeof b !== 'object') throw new Error(`error body is not an object: ${JSON.stringify(body)}`);
  const keys = Object.keys(b).sort().join(',');
  if (keys !== 'error_human,reason_codes') throw new Error(`error body keys are ${keys}: ${JSON.stringify(body)}`);
  if (!Array.isArray(b.reason_codes) || typeof b.error_human !== 'string') throw new Error('bad error body types');
}
