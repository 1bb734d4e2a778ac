import { createHash, randomUUID } from 'node:crypto';
import http, { type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompactSign, compactVerify, createLocalJWKSet, decodeProtectedHeader, exportJWK, generateKeyPair, type JWK } from 'jose';
import type { PrivateKeyAccount } from 'viem/accounts';
import { expect } from 'vitest';
import { signPayment } from './agent.js';
import { sql } from './foundation.js';
import { jsonOrText, type ApiResponse, type TestApp } from './harness.js';

/** The ETag the manifest must carry for the bytes served: the first 32 hex chars of their sha256, quoted. */
export const etagOf = (text: string) => `"${createHash('sha256').update(text).digest('hex').slice(0, 32)}"`;

export type HostResponse = { status: number; headers: IncomingHttpHeaders; text: string; body: any };

/** A request with an explicit Host header (fetch forbids setting Host, node:http does not). */
export function hostRequest(
  app: TestApp,
  method: string,
  path: string,
  host: string,
  opts: { body?: unknown; headers?: Record<string, string> } = {},
): Promise<HostResponse> {
  const url = new URL(app.baseUrl);
  const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body);
  const headers: Record<string, string> = { host, ...(opts.headers ?? {}) };
  if (payload !== undefined) {
    headers['content-type'] = 'application/json';
    headers['content-length'] = String(Buffer.byteLength(payload));
  }
  return new Promise((resolve, reject) => {
    const req = http.request({ hostname: url.hostname, port: url.port, method, path, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: jsonOrText(text) });
      });
    });
    req.on('error', reject);
    if (payload !== undefined) req.write(payload);
    req.end();
  });
}

export type Session = { id: string; pr: any; created: ApiResponse };

/** POST checkout; throws unless it answered 201. */
export async function openSession(
  app: TestApp,
  base: string,
  items: Array<{ sku: string; qty: number }>,
  extra: Record<string, unknown> = {},
): Promise<Session> {
  const body = { agent_id: randomUUID(), items, ...extra };
  const created = await app.request('POST', `${base}/agent/checkout`, { body });
  if (created.status !== 201) throw new Error(`checkout: ${created.status} ${created.text}`);
  return { id: created.body.session_id, pr: created.body.payment_required, created };
}

/** Signs an authorization for the session's requirement (with overrides) and settles it. */
export async function payX402(
  app: TestApp,
  base: string,
  s: Session,
  buyer: PrivateKeyAccount,
  overrides: Parameters<typeof signPayment>[2] = {},
) {
  const payment = await signPayment(buyer, s.pr, overrides);
  const res = await app.request('POST', `${base}/agent/checkout/${s.id}/settle`, { body: payment });
  return { res, payment };
}

export const settle = (app: TestApp, base: string, sessionId: string, body: unknown) =>
  app.request('POST', `${base}/agent/checkout/${sessionId}/settle`, { body });

export const poll = (app: TestApp, base: string, sessionId: string) => app.request('GET', `${base}/agent/checkout/${sessionId}`);

/** Verifies a receipt offline with jose against the agent JWKS of `base`; returns header and claims. */
export async function verifyReceipt(app: TestApp, base: string, jws: string) {
  const jwks = await app.request('GET', `${base}/.well-known/jwks.json`);
  expect(jwks.status).toBe(200);
  const { payload, protectedHeader } = await compactVerify(jws, createLocalJWKSet(jwks.body), { algorithms: ['EdDSA'] });
  expect(decodeProtectedHeader(jws)).toEqual(protectedHeader);
  return { header: protectedHeader, claims: JSON.parse(new TextDecoder().decode(payload)) as Record<string, any> };
}

/** Event types recorded for a session, in outbox order. */
export async function eventTypes(app: TestApp, sessionId: string): Promise<string[]> {
  const rows = await sql<{ type: string }>(app, "select type from events where payload->'data'->'object'->>'session_id' = ? order by seq", [sessionId]);
  return rows.map((r) => r.type);
}

/** The order rows of a session (there is at most one). */
export async function ordersOf(app: TestApp, sessionId: string) {
  return sql<{ id: string; decision: string; trust_tier: string; mandate_type: string; mandate_ref: string | null; settlement_ref: string | null }>(
    app,
    'select id, decision, trust_tier, mandate_type, mandate_ref, settlement_ref from orders where session_id = ?',
    [sessionId],
  );
}

type PrivateKey = Awaited<ReturnType<typeof generateKeyPair>>['privateKey'];

/** A mandate issuer: an Ed25519 key whose JWKS is served over HTTP on 127.0.0.1. */
export class MandateIssuer {
  private constructor(
    private readonly server: Server,
    readonly url: string,
    readonly kid: string,
    private readonly privateKey: PrivateKey,
  ) {}

  static async start(): Promise<MandateIssuer> {
    const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const kid = `issuer-${randomUUID()}`;
    const jwk: JWK = { ...(await exportJWK(publicKey)), kid, alg: 'EdDSA', use: 'sig' };
    const server = http.createServer((_req, res) => {
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
    return new MandateIssuer(server, url, kid, privateKey);
  }

  /** A compact JWS with header {alg: EdDSA, typ: svc-mandate+jws, kid}. */
  async sign(claims: Record<string, unknown>): Promise<string> {
    return new CompactSign(new TextEncoder().encode(JSON.stringify(claims)))
      .setProtectedHeader({ alg: 'EdDSA', typ: 'svc-mandate+jws', kid: this.kid })
      .sign(this.privateKey);
  }

  async stop() {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}
