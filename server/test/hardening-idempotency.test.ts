import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import type { Refund } from '@svc/contract';
import { canonicalJson } from '../src/lib/canonical-json.js';
import { sha256 } from '../src/lib/crypto.js';
import { merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { expectError, sql } from './helpers/foundation.js';
import { newBuyer, publishedMerchant, signRefund } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { contractRoutes, takesIdempotencyKey } from '../../scripts/emit-openapi.js';
import { DomainProofWorld, proofDomain, type ProofInstructions } from './helpers/domain-proof.js';

let app: TestApp;
let key: TestKey;

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  world = await DomainProofWorld.start();
  world.install(app);
});
let world: DomainProofWorld;
afterAll(async () => {
  await app?.stop();
  await world?.close();
});

/**
 * The key row a process leaves behind when it dies (kill -9) while running the request:
 * `lease` is its `locked_until` (SQL), or null for a row from before leases (its lease is created_at + 15 s).
 */
async function leaveDeadClaim(idemKey: string, body: unknown, ageSql: string, lease: string | null = null) {
  const hash = sha256(`POST /v1/merchants\n${canonicalJson(body)}`);
  await sql(app, `insert into idempotency_keys (id, scope_key, idem_key, request_hash, created_at, locked_until, lock_owner) values (?, ?, ?, ?, now() - ${ageSql}, ${lease ?? 'null'}, ?)`, [
    `idem_${ulid().toLowerCase()}`,
    `${key.projectId}:test`,
    idemKey,
    hash,
    lease === null ? null : 'a-dead-process',
  ]);
}

const post = (idemKey: string, body: unknown) => app.request('POST', '/v1/merchants', { key, body, headers: { 'idempotency-key': idemKey } });

describe('hardening: an Idempotency-Key whose request died is reclaimable (issue 9.2)', () => {
  it('GIVEN a key left in progress by a process that died while its lease runs WHEN the client retries THEN 409 IN_PROGRESS until the lease has run out, then the request runs once and later retries replay it', async () => {
    const body = merchantBody();
    const idemKey = `crash-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '12 seconds'", "now() + interval '1 hour'");
    expectError(await post(idemKey, body), 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    // The dead process renews nothing: its lease runs out.
    await sql(app, "update idempotency_keys set locked_until = now() - interval '1 second' where idem_key = ?", [idemKey]);
    const res = await post(idemKey, body);
    expect(res.status, res.text).toBe(201);
    const replay = await post(idemKey, body);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(res.text);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(1);
  });

  it('GIVEN a key row from before leases, left in progress 16 s ago WHEN the client retries THEN it runs at once (created_at + 15 s was its lease)', async () => {
    const body = merchantBody();
    const idemKey = `crash-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '16 seconds'");
    const res = await post(idemKey, body);
    expect(res.status, res.text).toBe(201);
    expect(await sql(app, 'select id from merchants where slug = ?', [body.slug])).toHaveLength(1);
  });

  it('GIVEN a key left in progress a day minus a minute ago WHEN the client retries THEN it runs at once (no 24 h wait)', async () => {
    const body = merchantBody();
    const idemKey = `crash-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '23 hours 59 minutes'");
    const res = await post(idemKey, body);
    expect(res.status, res.text).toBe(201);
  });

  it('GIVEN a key whose request is alive (lease in the future) WHEN retried THEN 409 IN_PROGRESS, and another body is still 409 REUSED', async () => {
    const body = merchantBody();
    const idemKey = `live-${ulid()}`;
    await leaveDeadClaim(idemKey, body, "interval '0 seconds'", "now() + interval '1 hour'");
    expectError(await post(idemKey, body), 409, 'IDEMPOTENCY_KEY_IN_PROGRESS');
    expectError(await post(idemKey, merchantBody()), 409, 'IDEMPOTENCY_KEY_REUSED');
  });

  it('GIVEN a request that completes normally THEN its row keeps no lease and its replay is byte for byte the same', async () => {
    const body = merchantBody();
    const idemKey = `ok-${ulid()}`;
    const first = await post(idemKey, body);
    expect(first.status).toBe(201);
    const rows = await sql(app, 'select status, locked_until from idempotency_keys where idem_key = ?', [idemKey]);
    expect(rows).toEqual([{ status: 201, locked_until: null }]);
    const again = await post(idemKey, body);
    expect(again.text).toBe(first.text);
  });
});

/**
 * Every table's rows as one text (the migrations' bookkeeping, the Idempotency-Key rows and the
 * rate-limit windows aside; an API key's last-used stamp moves on reads): equal before and after
 * means the database holds exactly the same thing.
 */
async function databaseState(): Promise<string> {
  const tables = await sql<{ t: string }>(
    app,
    "select tablename as t from pg_tables where schemaname = 'public' and tablename not like 'mikro_orm%' and tablename not in ('idempotency_keys', 'rate_limit_buckets') order by 1",
  );
  const parts: string[] = [];
  for (const { t } of tables) {
    const [row] = await sql<{ n: number; h: string }>(
      app,
      `select count(*)::int as n, coalesce(md5(string_agg(r, ',' order by r)), '') as h from (select (to_jsonb(x) - 'last_used_at')::text as r from "${t}" x) s`,
    );
    parts.push(`${t}: ${row!.n} rows ${row!.h}`);
  }
  return parts.join('\n');
}

/** A fault in storing an Idempotency-Key response: any statement that writes one fails (a trigger raises). */
async function withResponsesUnstorable<T>(work: () => Promise<T>): Promise<T> {
  await sql(app, `create or replace function test_refuse_stored_response() returns trigger language plpgsql as $$
    begin raise exception 'injected fault: the idempotent response cannot be stored'; end $$`);
  await sql(app, `create trigger test_refuse_stored_response before update on idempotency_keys for each row
    when (new.status is not null) execute function test_refuse_stored_response()`);
  try {
    return await work();
  } finally {
    await sql(app, 'drop trigger test_refuse_stored_response on idempotency_keys');
  }
}

const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';
const ingested = (id: string, merchantId: string, over: Record<string, unknown> = {}) => ({
  id,
  merchantId,
  agentId: randomUUID(),
  state: 'accepted',
  verdict: { decision: 'accept', tier: 'standard', reasonCodes: ['OK'] },
  total: { currency: 'USD', subtotal: '4.50', tax: '0.00', total: '4.50' },
  lines: [{ sku: 'coffee', qty: 1 }],
  ...over,
});

describe('issue 24.7: an idempotent write and its stored response commit together, on every route that honours Idempotency-Key', () => {
  let shop: Awaited<ReturnType<typeof publishedMerchant>>;
  let endpointId: string;
  let eventId: string;
  const q = () => `?merchant_id=${shop.merchant.id}`;
  /** A session of a new agent, held for review (the policy holds every unknown agent). */
  const heldSession = async () => {
    const s = await openSession(app, shop.base, [{ sku: 'coffee', qty: 1 }]);
    const { res } = await payX402(app, shop.base, s, newBuyer());
    expect(res.status, res.text).toBe(202);
    return s.id;
  };

  /** A merchant whose sales are accepted, receiving on a wallet this test holds (the refunds' signer). */
  let refundShop: Awaited<ReturnType<typeof publishedMerchant>>;
  const refundWallet = newBuyer();
  /** An accepted x402 order of refundShop, for a refund. */
  const paidOrderId = async () => {
    const s = await openSession(app, refundShop.base, [{ sku: 'beans', qty: 1 }]);
    const { res } = await payX402(app, refundShop.base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
    return res.body.order_id as string;
  };
  /** A refund awaiting its authorization, made without an Idempotency-Key. */
  const newRefund = async () => {
    const r = await app.request<Refund>('POST', '/v1/refunds', { key, body: { order_id: await paidOrderId() } });
    expect(r.status, r.text).toBe(201);
    return r.body;
  };

  beforeAll(async () => {
    refundShop = await publishedMerchant(app, { key, merchant: { receiving: { x402: { chain: 'base-sepolia', address: refundWallet.address }, mock: { account: 'acct_test' } } } });
    shop = await publishedMerchant(app, { key, policy: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null } });
    const ep = await app.request('POST', '/v1/webhooks/endpoints', { key, body: { url: 'http://127.0.0.1:9/hook', enabled_events: ['*'] } });
    expect(ep.status, ep.text).toBe(201);
    endpointId = ep.body.id;
    const test = await app.request('POST', `/v1/webhooks/endpoints/${endpointId}/test`, { key });
    expect(test.status, test.text).toBe(200);
    eventId = test.body.event_id;
  });

  type Route = { name: string; status: number; request: () => Promise<{ method: string; path: string; body?: unknown }> };
  const routes: Route[] = [
    { name: 'POST /v1/merchants', status: 201, request: async () => ({ method: 'POST', path: '/v1/merchants', body: merchantBody() }) },
    {
      name: 'POST /v1/catalog',
      status: 201,
      request: async () => ({ method: 'POST', path: `/v1/catalog${q()}`, body: { sku: `sku-${ulid().toLowerCase()}`, name: 'Tea', price: { amount: '3.00', currency: 'USD' } } }),
    },
    { name: 'POST /v1/keys', status: 201, request: async () => ({ method: 'POST', path: '/v1/keys', body: { mode: 'test', name: `k-${ulid()}`, scopes: ['orders:read'] } }) },
    {
      name: 'POST /v1/keys/{id}/roll',
      status: 200,
      request: async () => ({ method: 'POST', path: `/v1/keys/${(await app.key('test', { projectId: key.projectId, scopes: ['orders:read'] })).id}/roll`, body: {} }),
    },
    { name: 'PUT /v1/policy', status: 201, request: async () => ({ method: 'PUT', path: `/v1/policy${q()}`, body: { body: { holdForReviewBelowTier: 'standard', requireMandateOverUsd: null }, note: ulid() } }) },
    { name: 'POST /v1/publish', status: 200, request: async () => ({ method: 'POST', path: `/v1/publish${q()}` }) },
    {
      name: 'PUT /v1/receiving',
      status: 200,
      request: async () => ({ method: 'PUT', path: `/v1/receiving${q()}`, body: { receiving: { ...shop.merchant.receiving, mock: { account: `acct_${ulid().toLowerCase()}` } } } }),
    },
    {
      name: 'POST /v1/webhooks/endpoints',
      status: 201,
      request: async () => ({ method: 'POST', path: '/v1/webhooks/endpoints', body: { url: 'http://127.0.0.1:9/other', enabled_events: ['order.settled'], description: ulid() } }),
    },
    { name: 'POST /v1/webhooks/endpoints/{id}/rotate-secret', status: 200, request: async () => ({ method: 'POST', path: `/v1/webhooks/endpoints/${endpointId}/rotate-secret` }) },
    { name: 'POST /v1/webhooks/endpoints/{id}/test', status: 200, request: async () => ({ method: 'POST', path: `/v1/webhooks/endpoints/${endpointId}/test` }) },
    { name: 'POST /v1/events/{id}/replay', status: 200, request: async () => ({ method: 'POST', path: `/v1/events/${eventId}/replay` }) },
    { name: 'POST /v1/sessions/{id}/approve', status: 200, request: async () => ({ method: 'POST', path: `/v1/sessions/${await heldSession()}/approve` }) },
    { name: 'POST /v1/sessions/{id}/decline', status: 200, request: async () => ({ method: 'POST', path: `/v1/sessions/${await heldSession()}/decline` }) },
    {
      name: 'POST /v1/merchants/{id}/domain/verify',
      status: 200,
      request: async () => {
        const m = await app.request('POST', '/v1/merchants', { key, body: merchantBody({ domain: proofDomain() }) });
        expect(m.status, m.text).toBe(201);
        world.publishTxt(m.body.domain, (m.body.domain_verification as ProofInstructions).dns_txt.value);
        return { method: 'POST', path: `/v1/merchants/${m.body.id}/domain/verify` };
      },
    },
    { name: 'POST /v1/refunds', status: 201, request: async () => ({ method: 'POST', path: '/v1/refunds', body: { order_id: await paidOrderId(), reason: 'requested_by_customer' } }) },
    {
      name: 'POST /v1/refunds/{id}/authorize',
      status: 200,
      request: async () => {
        const r = await newRefund();
        return { method: 'POST', path: `/v1/refunds/${r.id}/authorize`, body: { signature: await signRefund(refundWallet, r) } };
      },
    },
    { name: 'POST /v1/refunds/{id}/cancel', status: 200, request: async () => ({ method: 'POST', path: `/v1/refunds/${(await newRefund()).id}/cancel` }) },
    { name: 'POST /v1/ingest/session', status: 200, request: async () => ({ method: 'POST', path: '/v1/ingest/session', body: { session: ingested(randomUUID(), shop.merchant.id) } }) },
    {
      name: 'POST /v1/ingest/order',
      status: 201,
      request: async () => ({ method: 'POST', path: '/v1/ingest/order', body: { session: ingested(randomUUID(), shop.merchant.id), receipt: RECEIPT, settlement: { reference: `ref-${ulid()}`, rail: 'x402' } } }),
    },
    {
      name: 'POST /v1/ingest/decision',
      status: 200,
      request: async () => ({ method: 'POST', path: '/v1/ingest/decision', body: { session: ingested(randomUUID(), shop.merchant.id, { state: 'rejected', verdict: { decision: 'reject', tier: 'standard', reasonCodes: ['POLICY'] } }) } }),
    },
  ];

  it('GIVEN the contract THEN every route that honours Idempotency-Key is exercised below (a new one must be added, and write its response in its transaction)', () => {
    const honouring = contractRoutes().filter(takesIdempotencyKey).map((r) => `${r.method.toUpperCase()} ${r.openApiPath}`);
    expect([...routes.map((r) => r.name), 'POST /v1/validate'].sort()).toEqual(honouring.sort());
  });

  it.each(routes)('GIVEN the response of $name cannot be stored WHEN it runs with an Idempotency-Key THEN nothing is written (5xx), and the retry writes once and replays byte for byte', async (route) => {
    const { method, path, body } = await route.request();
    const send = (idemKey: string) => app.request(method, path, { key, body, headers: { 'idempotency-key': idemKey } });
    const idemKey = `atomic-${ulid()}`;

    const before = await databaseState();
    const failed = await withResponsesUnstorable(() => send(idemKey));
    expectError(failed, 500, 'INTERNAL_ERROR');
    expect(await databaseState()).toBe(before);

    const first = await send(idemKey);
    expect(first.status, first.text).toBe(route.status);
    const written = await databaseState();
    expect(written).not.toBe(before);
    const replay = await send(idemKey);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.status).toBe(route.status);
    expect(replay.text).toBe(first.text);
    expect(await databaseState()).toBe(written);
  });

  it('GIVEN a held session whose approval captures through a facilitator outside the process WHEN approved with an Idempotency-Key THEN a retry while the capture runs replays 202 settlement_pending (stored with the approval), and once the capture ends the 200 replaces it and replays byte for byte', async () => {
    const sessionId = await heldSession();
    // The test mode facilitator, as a facilitator outside the process would run it: the capture
    // happens after the approval's transaction, and waits here until released.
    const mock = app.services.facilitators.test;
    let startCapture!: () => void;
    const captureMayRun = new Promise<void>((r) => (startCapture = r));
    let capturing!: () => void;
    const isCapturing = new Promise<void>((r) => (capturing = r));
    app.services.facilitators.test = {
      name: 'remote',
      inProcess: false,
      verify: (proof, nowSec) => mock.verify(proof, nowSec),
      settle: async (proof, opts) => {
        capturing();
        await captureMayRun;
        return mock.settle(proof, opts);
      },
      reconcile: (input) => mock.reconcile(input),
      health: () => mock.health(),
      close: async () => undefined,
    };
    try {
      const headers = { 'idempotency-key': `approve-${ulid()}` };
      const approving = app.request('POST', `/v1/sessions/${sessionId}/approve`, { key, headers });
      await isCapturing;
      const meanwhile = await app.request('POST', `/v1/sessions/${sessionId}/approve`, { key, headers });
      expect(meanwhile.status, meanwhile.text).toBe(202);
      expect(meanwhile.headers.get('idempotent-replayed')).toBe('true');
      expect(meanwhile.body).toMatchObject({ status: 'settlement_pending', session_id: sessionId, reason_codes: ['SETTLEMENT_PENDING'] });
      startCapture();
      const approved = await approving;
      expect(approved.status, approved.text).toBe(200);
      expect(approved.body).toMatchObject({ status: 'accepted', order_id: expect.stringMatching(/^ord_/) });
      const replay = await app.request('POST', `/v1/sessions/${sessionId}/approve`, { key, headers });
      expect(replay.headers.get('idempotent-replayed')).toBe('true');
      expect(replay.status).toBe(200);
      expect(replay.text).toBe(approved.text);
      expect(await sql(app, 'select status, locked_until from idempotency_keys where idem_key = ?', [headers['idempotency-key']])).toEqual([{ status: 200, locked_until: null }]);
    } finally {
      startCapture();
      app.services.facilitators.test = mock;
    }
  });

  it('GIVEN POST /v1/validate (reads only) WHEN it runs with an Idempotency-Key THEN its answer is stored after it and replayed', async () => {
    const idemKey = `validate-${ulid()}`;
    const first = await app.request('POST', `/v1/validate${q()}`, { key, headers: { 'idempotency-key': idemKey } });
    expect(first.status, first.text).toBe(200);
    const replay = await app.request('POST', `/v1/validate${q()}`, { key, headers: { 'idempotency-key': idemKey } });
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.text).toBe(first.text);
  });

  it('GIVEN an API key minted with an Idempotency-Key THEN its stored response (which holds the secret) is sealed at rest', async () => {
    const idemKey = `sealed-${ulid()}`;
    const minted = await app.request('POST', '/v1/keys', { key, body: { mode: 'test', name: 'sealed' }, headers: { 'idempotency-key': idemKey } });
    expect(minted.status, minted.text).toBe(201);
    const [row] = await sql<{ response: string }>(app, 'select response from idempotency_keys where idem_key = ?', [idemKey]);
    expect(row!.response).not.toContain(minted.body.secret);
    expect(row!.response).not.toContain(minted.body.id);
  });
});
