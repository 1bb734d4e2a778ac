import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CompactSign, exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x402Client } from '@x402/fetch';
import { ExactEvmScheme } from '@x402/evm';
import { encodePaymentSignatureHeader } from '@x402/core/http';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { eventTypes, openSession, ordersOf, payX402 } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';
import { paymentRequiredOf } from './helpers/x402.js';

/**
 * The settle path's statement budget (docs/settlement.md "Statement budget"), counted where
 * the statements leave the process: on the `pg` clients of the pool, or on the PGlite instance
 * (its transaction's BEGIN and COMMIT included). A statement sent with parameters (extended
 * protocol: prepared) is told apart from a simple query with literals in its text.
 */
type Sent = { sql: string; params: number; named: boolean };

class StatementCounter {
  private sent: Sent[] | null = null;

  static async attach(app: TestApp): Promise<StatementCounter> {
    const counter = new StatementCounter();
    const native: any = await app.services.orm.em.getConnection().getNativeClient();
    if (app.target.kind === 'postgres') {
      const wrapped = new WeakSet<object>();
      native.on('acquire', (client: any) => {
        if (wrapped.has(client)) return;
        wrapped.add(client);
        const query = client.query.bind(client);
        client.query = (text: any, values?: any, cb?: any) => {
          if (typeof text === 'string') counter.note(text, Array.isArray(values) ? values.length : 0, false);
          else if (text && typeof text.text === 'string') counter.note(text.text, text.values?.length ?? 0, Boolean(text.name));
          return query(text, values, cb);
        };
      });
    } else {
      const query = native.query.bind(native);
      native.query = (sql: string, params?: unknown[], opts?: unknown) => {
        counter.note(sql, params?.length ?? 0, false);
        return query(sql, params, opts);
      };
      const transaction = native.transaction.bind(native);
      native.transaction = (cb: (tx: any) => Promise<unknown>) => {
        counter.note('begin', 0, false);
        let ended = 'rollback';
        return transaction(async (tx: any) => {
          const txQuery = tx.query.bind(tx);
          tx.query = (sql: string, params?: unknown[], opts?: unknown) => {
            counter.note(sql, params?.length ?? 0, false);
            return txQuery(sql, params, opts);
          };
          const r = await cb(tx);
          ended = 'commit';
          return r;
        }).finally(() => counter.note(ended, 0, false));
      };
    }
    return counter;
  }

  private note(sql: string, params: number, named: boolean) {
    this.sent?.push({ sql: sql.replace(/\s+/g, ' ').trim(), params, named });
  }

  /** Transactions open now, among the statements counted so far (BEGINs not yet ended). */
  open(): number {
    const sent = this.sent ?? [];
    return sent.filter((x) => x.sql === 'begin').length - sent.filter((x) => x.sql === 'commit' || x.sql === 'rollback').length;
  }

  async count<T>(fn: () => Promise<T>): Promise<{ result: T; sent: Sent[] }> {
    this.sent = [];
    try {
      const result = await fn();
      return { result, sent: this.sent };
    } finally {
      this.sent = null;
    }
  }
}

const listing = (sent: Sent[]) => sent.map((s, i) => `${String(i + 1).padStart(2)}. [${s.params ? `$${s.params}` : 'lit'}] ${s.sql.slice(0, 160)}`).join('\n');
const textBytes = (sent: Sent[]) => sent.reduce((n, s) => n + Buffer.byteLength(s.sql), 0);

let app: TestApp;
let counter: StatementCounter;
let shop: Awaited<ReturnType<typeof publishedMerchant>>;
let held: Awaited<ReturnType<typeof publishedMerchant>>;
const OPEN_POLICY = { holdForReviewBelowTier: null, requireMandateOverUsd: null, minReputationTier: null, maxPerTransactionUsd: 1000 };

beforeAll(async () => {
  app = await TestApp.start();
  counter = await StatementCounter.attach(app);
  shop = await publishedMerchant(app, { policy: OPEN_POLICY, products: [{ sku: 'coffee', amount: '0.25' }] });
  held = await publishedMerchant(app, { policy: { ...OPEN_POLICY, holdForReviewBelowTier: 'standard' } });
});
afterAll(async () => app?.stop());

describe('statements per settle', () => {
  it('GIVEN an open x402 session WHEN the agent settles it over JSON (test mode, mock facilitator) THEN accepted in at most 5 statements: begin, the lock (session, merchant, gate lock), the gate inputs, the write, commit', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agentId() });
    // Warm-up settle (first use of the merchant's reputation row, prepared statements).
    await payX402(app, shop.base, await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]), newBuyer());
    const { result, sent } = await counter.count(() => payX402(app, shop.base, s, newBuyer()));
    expect(result.res.status, result.res.text).toBe(200);
    console.info(`JSON settle: ${sent.length} statements, ${textBytes(sent)} bytes of SQL text\n${listing(sent)}`);
    expect(await eventTypes(app, s.id)).toEqual(['order.accepted', 'order.settled']);
    expect(await ordersOf(app, s.id)).toHaveLength(1);
    expect(sent.length, listing(sent)).toBeLessThanOrEqual(5);
    // no pre-read outside the transaction: the merchant and the session come with the lock
    expect(sent[0]!.sql, listing(sent)).toBe('begin');
    expect(sent[1]!.sql, listing(sent)).toMatch(/from checkout_sessions s join merchants m .* for update of s$/);
  });

  it('GIVEN an accepted settle WHEN its rows are read THEN the receipt JWS is stored once (receipts), and the same payment replays the answer byte for byte with it', async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const { res, payment } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
    const jws = res.body.receipt as string;
    expect(await sql(app, 'select jws from receipts where session_id = ?', [s.id])).toEqual([{ jws }]);
    expect(await sql(app, "select column_name from information_schema.columns where table_name = 'checkout_sessions' and column_name = 'receipt_jws'")).toEqual([]);
    const [row] = await sql<{ settle_response: string }>(app, 'select settle_response from checkout_sessions where id = ?', [s.id]);
    expect(row!.settle_response).not.toContain(jws);
    expect(row!.settle_response).toContain('"receipt":null');
    const again = await app.request('POST', `${shop.base}/agent/checkout/${s.id}/settle`, { body: payment });
    expect(again.status).toBe(200);
    expect(again.text).toBe(res.text);
    // the poll shows it too, read by join
    expect((await app.request('GET', `${shop.base}/agent/checkout/${s.id}`)).body.receipt).toBe(jws);
  });

  it('GIVEN a paid resource WHEN a stock x402 client pays it with PAYMENT-SIGNATURE THEN 200 in at most 11 statements (the merchant, the quote, one idempotent lookup, and the checkout read and one insert before the 5 of the settle)', async () => {
    const url = `${app.baseUrl}${shop.base}/x402/coffee`;
    const pr = paymentRequiredOf(await fetch(url));
    const payload = await new x402Client().register('eip155:*', new ExactEvmScheme(newBuyer())).createPaymentPayload(pr);
    const { result: res, sent } = await counter.count(() => fetch(url, { headers: { 'PAYMENT-SIGNATURE': encodePaymentSignatureHeader(payload) } }));
    expect(res.status, await res.clone().text()).toBe(200);
    console.info(`x402 paid resource: ${sent.length} statements, ${textBytes(sent)} bytes\n${listing(sent)}`);
    expect(sent.length, listing(sent)).toBeLessThanOrEqual(11);
  });

  it('GIVEN a held session WHEN the merchant approves it THEN accepted in at most 14 statements', async () => {
    const s = await openSession(app, held.base, [{ sku: 'coffee', qty: 1 }]);
    const { res } = await payX402(app, held.base, s, newBuyer());
    expect(res.status, res.text).toBe(202);
    const { result: approved, sent } = await counter.count(() => app.request('POST', `/v1/sessions/${s.id}/approve`, { key: held.key }));
    expect(approved.status, approved.text).toBe(200);
    console.info(`hold approval: ${sent.length} statements, ${textBytes(sent)} bytes\n${listing(sent)}`);
    expect(sent.length, listing(sent)).toBeLessThanOrEqual(14);
  });
});

describe('nothing outside is called inside a transaction', () => {
  it('GIVEN a mandate whose issuer keys are not cached WHEN the agent settles THEN the keys are fetched with no transaction open, between the transaction that found out and the gate\'s; once cached, the next settle verifies under the lock in 6 statements', async () => {
    const { publicKey, privateKey } = await generateKeyPair('EdDSA', { crv: 'Ed25519' });
    const kid = `issuer-${randomUUID()}`;
    const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'EdDSA', use: 'sig' };
    const openAtFetch: number[] = [];
    const server = http.createServer((_req, res) => {
      openAtFetch.push(counter.open());
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ keys: [jwk] }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
      const m = await publishedMerchant(app, { policy: OPEN_POLICY, products: [{ sku: 'coffee', amount: '0.25' }], merchant: { trusted_svc_jwks_url: url } });
      // a settle without a mandate first: the merchant's mode is known, so settles try the one transaction
      expect((await payX402(app, m.base, await openSession(app, m.base, [{ sku: 'coffee', qty: 1 }]), newBuyer())).res.status).toBe(200);
      const mandated = async () => {
        const agent = agentId();
        const claims = {
          iss: 'https://wallet.example',
          sub: `mnd_${randomUUID()}`,
          exp: Math.floor(Date.now() / 1000) + 600,
          decision: 'approve',
          agent_id: agent,
          authorization: { merchant: m.merchant.id, max_amount: '20.00', currency: 'USD', intent: 'coffee' },
        };
        const token = await new CompactSign(new TextEncoder().encode(JSON.stringify(claims))).setProtectedHeader({ alg: 'EdDSA', typ: 'svc-mandate+jws', kid }).sign(privateKey);
        return openSession(app, m.base, [{ sku: 'coffee', qty: 1 }], { agent_id: agent, mandate: { type: 'svc', token } });
      };

      const first = await mandated();
      const { result, sent } = await counter.count(() => payX402(app, m.base, first, newBuyer()));
      expect(result.res.status, result.res.text).toBe(200);
      expect(openAtFetch, listing(sent)).toEqual([0]);
      // the transaction that found the keys missing read the lock only, then ended
      expect(sent.slice(0, 3).map((x) => x.sql.split(' ')[0]), listing(sent)).toEqual(['begin', 'select', expect.stringMatching(/^(commit|rollback)$/)]);

      const second = await mandated();
      const again = await counter.count(() => payX402(app, m.base, second, newBuyer()));
      expect(again.result.res.status, again.result.res.text).toBe(200);
      expect(openAtFetch).toHaveLength(1);
      expect(again.sent.length, listing(again.sent)).toBeLessThanOrEqual(6);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});

describe('event bytes are written once, where they are delivered', () => {
  it('GIVEN no webhook endpoint WHEN a settle records its events THEN no bytes are stored beside them; WHEN one is replayed to a later endpoint THEN its frozen bytes keep the documented key order', async () => {
    const key = await app.key('test');
    const mine = await publishedMerchant(app, { key, policy: OPEN_POLICY, products: [{ sku: 'tea', amount: '0.10' }] });
    const s = await openSession(app, mine.base, [{ sku: 'tea', qty: 1 }]);
    expect((await payX402(app, mine.base, s, newBuyer())).res.status).toBe(200);
    const events = (await app.request('GET', '/v1/events', { key })).body.data as Array<{ id: string; type: string }>;
    const settled = events.find((e) => e.type === 'order.settled')!;
    expect(await sql(app, 'select event_id from webhook_event_bodies where event_id in (?)', [events.map((e) => e.id)])).toEqual([]);

    const ep = await app.request('POST', '/v1/webhooks/endpoints', { key, body: { url: 'https://example.com/hook', enabled_events: ['*'] } });
    expect(ep.status, ep.text).toBe(201);
    const replay = await app.request('POST', `/v1/events/${settled.id}/replay`, { key });
    expect(replay.body.deliveries).toEqual([{ endpoint_id: ep.body.id, status: 'pending' }]);
    const [frozen] = await sql<{ body: string }>(app, 'select body from webhook_event_bodies where event_id = ?', [settled.id]);
    const body = JSON.parse(frozen!.body);
    expect(Object.keys(body)).toEqual(['id', 'type', 'created', 'livemode', 'api_version', 'data']);
    expect(Object.keys(body.data.object)).toEqual(['id', 'source', 'session_id', 'merchant_id', 'agent_id', 'total', 'items', 'rail_name', 'settlement_ref', 'receipt_id', 'mandate_type', 'mandate_ref', 'trust_tier']);
    expect(Object.keys(body.data.object.total)).toEqual(['currency', 'subtotal', 'tax', 'total']);
  });
});
