import type { MerchantPolicy } from '@svc/contract';
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { MerchantClient, type FetchLike } from '../src/index.js';
import { TEST_PAY_TO, type TestApp, type TestKey } from '../../server/test/helpers/harness.js';

export { TEST_PAY_TO };

export function merchantClient(app: TestApp, key: TestKey | string, opts: { baseUrl?: string; maxRetries?: number; timeoutMs?: number } = {}) {
  return new MerchantClient({
    apiKey: typeof key === 'string' ? key : key.secret,
    baseUrl: opts.baseUrl ?? app.baseUrl,
    maxRetries: opts.maxRetries,
    timeoutMs: opts.timeoutMs,
  });
}

export function slug(prefix = 'sdk') {
  return `${prefix}-${randomBytes(5).toString('hex')}`;
}

/** A create-merchant body with x402 (base-sepolia) and mock receiving. */
export function newMerchant(overrides: { slug?: string; name?: string } = {}) {
  const s = overrides.slug ?? slug();
  return {
    slug: s,
    name: overrides.name ?? 'SDK Shop',
    domain: `${s}.example.com`,
    receiving: { x402: { chain: 'base-sepolia' as const, address: TEST_PAY_TO }, mock: { account: 'acct_sdk' } },
  };
}

/** A published test merchant with two products, configured through the SDK itself. */
export async function setupShop(svc: MerchantClient, policy: MerchantPolicy = { requireMandateOverUsd: 100, holdForReviewBelowTier: null }) {
  const merchant = await svc.merchants.create(newMerchant());
  await svc.catalog.create({ sku: 'coffee', name: 'Coffee', price: { amount: '4.50', currency: 'USD' }, category: 'drinks' }, { merchant_id: merchant.id });
  await svc.catalog.create({ sku: 'beans', name: 'Beans 1 kg', price: { amount: '12.00', currency: 'usd' }, category: 'beans' }, { merchant_id: merchant.id });
  await svc.policy.put({ body: policy }, { merchant_id: merchant.id });
  await svc.policy.publish({ merchant_id: merchant.id });
  return merchant;
}

export type Recorded = { method: string; url: string; idempotencyKey: string | undefined; outcome: string };

export type FlakyMode =
  /** answer 503 with an error body (and Retry-After: 0) without forwarding */
  | '503'
  /** answer 429 with Retry-After: 0 without forwarding */
  | '429'
  /** close the connection before forwarding */
  | 'drop'
  /** forward, let the server process it, then close the connection instead of answering */
  | 'drop-after-forward'
  /** never answer (the client's timeout fires), and do not forward */
  | 'hang';

/**
 * A local HTTP proxy in front of the real server that fails the first `failures` requests
 * in the given mode, then forwards; it records every request's Idempotency-Key.
 */
export class FlakyProxy {
  readonly requests: Recorded[] = [];
  private failuresLeft = 0;
  private mode: FlakyMode = '503';
  private readonly server: http.Server;
  private readonly hung: http.ServerResponse[] = [];
  url = '';

  private constructor(private readonly upstream: string) {
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  static async start(upstream: string): Promise<FlakyProxy> {
    const p = new FlakyProxy(upstream);
    await new Promise<void>((resolve) => p.server.listen(0, '127.0.0.1', resolve));
    p.url = `http://127.0.0.1:${(p.server.address() as AddressInfo).port}`;
    return p;
  }

  failNext(failures: number, mode: FlakyMode) {
    this.failuresLeft = failures;
    this.mode = mode;
    this.requests.length = 0;
  }

  async stop() {
    for (const r of this.hung) r.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse) {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = Buffer.concat(chunks);
    const key = req.headers['idempotency-key'];
    const failing = this.failuresLeft > 0;
    if (failing) this.failuresLeft--;
    const mode = failing ? this.mode : 'forward';
    this.requests.push({ method: req.method ?? '', url: req.url ?? '', idempotencyKey: typeof key === 'string' ? key : undefined, outcome: mode });
    if (mode === '503') {
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '0' });
      return res.end(JSON.stringify({ reason_codes: ['DATABASE_UNAVAILABLE'], error_human: 'flaky proxy says no' }));
    }
    if (mode === '429') {
      res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '0' });
      return res.end(JSON.stringify({ reason_codes: ['RATE_LIMITED'], error_human: 'slow down' }));
    }
    if (mode === 'drop') return req.socket.destroy();
    if (mode === 'hang') {
      this.hung.push(res);
      return;
    }
    const upstream = await forward(this.upstream, req.method ?? 'GET', req.url ?? '/', req.headers, body);
    if (mode === 'drop-after-forward') return req.socket.destroy();
    res.writeHead(upstream.status, upstream.headers);
    res.end(upstream.body);
  }
}

function forward(base: string, method: string, path: string, headers: IncomingHttpHeaders, body: Buffer) {
  const target = new URL(path, base);
  return new Promise<{ status: number; headers: Record<string, string>; body: Buffer }>((resolve, reject) => {
    const out = http.request(target, { method, headers: { ...headers, host: target.host, connection: 'close' } }, (r) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => {
        const h: Record<string, string> = {};
        for (const [k, v] of Object.entries(r.headers)) if (typeof v === 'string' && k !== 'connection' && k !== 'transfer-encoding') h[k] = v;
        resolve({ status: r.statusCode ?? 502, headers: h, body: Buffer.concat(chunks) });
      });
      r.on('error', reject);
    });
    out.on('error', reject);
    out.end(body);
  });
}

/**
 * A fetch that sends every request to the local server but with the Host header of the URL
 * asked for, as DNS would for a merchant domain or a discovery host pointed at the service.
 * (undici's fetch does not let a caller set Host.)
 */
export function hostRoutingFetch(serverBaseUrl: string): FetchLike {
  const server = new URL(serverBaseUrl);
  return (input, init) =>
    new Promise<Response>((resolve, reject) => {
      const wanted = new URL(input);
      const headers: Record<string, string> = { host: wanted.host };
      new Headers(init.headers).forEach((v, k) => {
        headers[k] = v;
      });
      const req = http.request(
        { host: server.hostname, port: server.port, method: init.method ?? 'GET', path: `${wanted.pathname}${wanted.search}`, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const h = new Headers();
            for (const [k, v] of Object.entries(res.headers)) if (typeof v === 'string') h.set(k, v);
            const status = res.statusCode ?? 502;
            const noBody = status === 204 || status === 304;
            resolve(new Response(noBody ? null : Buffer.concat(chunks), { status, headers: h }));
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      if (typeof init.body === 'string') req.write(init.body);
      req.end();
    });
}

/** The error a promise rejects with; fails the test when it resolves. */
export async function caught(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to throw');
}
