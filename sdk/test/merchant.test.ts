import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  MerchantClient,
  SvcApiError,
  SvcAuthError,
  SvcConflictError,
  SvcNotFoundError,
  SvcValidationError,
  type Merchant,
} from '../src/index.js';
import { TestApp, type TestKey } from '../../server/test/helpers/harness.js';
import { merchantClient, newMerchant, caught } from './helpers.js';

let app: TestApp;
let key: TestKey;
let svc: MerchantClient;
let merchant: Merchant;

const RECEIPT = 'eyJhbGciOiJFZERTQSJ9.eyJzdWIiOiJyY3B0X3gifQ.c2ln';

beforeAll(async () => {
  app = await TestApp.start();
  key = await app.key('test');
  svc = merchantClient(app, key);
  merchant = await svc.merchants.create(newMerchant({ name: 'Namespace Shop' }));
});
afterAll(async () => app?.stop());

describe('MerchantClient construction', () => {
  it('GIVEN test and live keys WHEN constructing THEN livemode follows the key prefix and me agrees', async () => {
    expect(svc.livemode).toBe(false);
    const me = await svc.me.get();
    expect(me).toMatchObject({ livemode: false, key: { id: key.id, mode: 'test' }, project: { id: key.projectId } });

    const live = await app.key('live');
    const liveClient = merchantClient(app, live);
    expect(liveClient.livemode).toBe(true);
    expect((await liveClient.me.get()).livemode).toBe(true);
  });

  it('GIVEN something that is not an svc key WHEN constructing THEN it throws before any request', () => {
    expect(() => new MerchantClient({ apiKey: 'sk_test_123', baseUrl: app.baseUrl })).toThrow(/svc_test_ or svc_live_/);
  });
});

describe('merchants', () => {
  it('GIVEN a created merchant WHEN get, update, list and jwks THEN each returns the contract body', async () => {
    expect(merchant.id).toMatch(/^mrch_/);
    expect(merchant.livemode).toBe(false);
    expect(await svc.merchants.get(merchant.id)).toEqual(merchant);

    const renamed = await svc.merchants.update(merchant.id, { name: 'Renamed Shop' });
    expect(renamed.name).toBe('Renamed Shop');
    expect(renamed.slug).toBe(merchant.slug);

    const page = await svc.merchants.list({ limit: 10 }).page();
    expect(page.data.map((m) => m.id)).toContain(merchant.id);

    const jwks = await svc.merchants.jwks(merchant.id);
    expect(jwks.keys.map((k) => k.kid)).toEqual([merchant.receipt_kid]);
  });

  it('GIVEN a taken slug WHEN creating THEN SvcConflictError MERCHANT_SLUG_TAKEN with the request id', async () => {
    const err = await caught(svc.merchants.create(newMerchant({ slug: merchant.slug })));
    expect(err).toBeInstanceOf(SvcConflictError);
    expect(err).toBeInstanceOf(SvcApiError);
    const e = err as SvcConflictError;
    expect(e.status).toBe(409);
    expect(e.reasonCodes).toEqual(['MERCHANT_SLUG_TAKEN']);
    expect(e.code).toBe('MERCHANT_SLUG_TAKEN');
    expect(e.errorHuman).toMatch(/slug/);
    expect(e.requestId).toMatch(/^req_/);
  });

  it('GIVEN an unknown id WHEN getting THEN SvcNotFoundError NOT_FOUND', async () => {
    const err = await caught(svc.merchants.get('mrch_00000000000000000000000000'));
    expect(err).toBeInstanceOf(SvcNotFoundError);
    expect((err as SvcNotFoundError).reasonCodes).toEqual(['NOT_FOUND']);
  });
});

describe('catalog', () => {
  it('GIVEN a merchant WHEN products are created, listed, updated and retired THEN the catalog follows', async () => {
    const scope = { merchant_id: merchant.id };
    const tea = await svc.catalog.create({ sku: 'tea', name: 'Tea', price: { amount: '3.10', currency: 'usd' }, category: 'drinks' }, scope);
    expect(tea).toMatchObject({ sku: 'tea', price: { amount: '3.10', currency: 'USD' }, available: true });
    expect(tea.id).toMatch(/^prod_/);
    await svc.catalog.create({ sku: 'cake', name: 'Cake', price: { amount: '5.00', currency: 'USD' }, category: 'food' }, scope);

    const updated = await svc.catalog.update('tea', { price: { amount: '3.20', currency: 'USD' } }, scope);
    expect(updated.price.amount).toBe('3.20');

    await svc.catalog.remove('cake', scope);
    const all = await svc.catalog.list(scope);
    expect(all.items.map((i) => [i.sku, i.available])).toEqual([
      ['tea', true],
      ['cake', false],
    ]);
    const available = await svc.catalog.list({ ...scope, available: 'true' });
    expect(available.items.map((i) => i.sku)).toEqual(['tea']);
  });

  it('GIVEN a bad price or a duplicate SKU WHEN creating THEN typed validation and conflict errors', async () => {
    const bad = await caught(svc.catalog.create({ sku: 'bad', name: 'Bad', price: { amount: '1.123456789', currency: 'USD' } }, { merchant_id: merchant.id }));
    expect(bad).toBeInstanceOf(SvcValidationError);
    expect((bad as SvcValidationError).reasonCodes).toEqual(['PRICE_AMOUNT_INVALID']);
    expect((bad as SvcValidationError).status).toBe(400);

    const dup = await caught(svc.catalog.create({ sku: 'tea', name: 'Tea again', price: { amount: '1.00', currency: 'USD' } }, { merchant_id: merchant.id }));
    expect(dup).toBeInstanceOf(SvcConflictError);
    expect((dup as SvcConflictError).reasonCodes).toEqual(['PRODUCT_SKU_TAKEN']);
  });
});

describe('receiving', () => {
  it('GIVEN a merchant WHEN receiving is read and replaced THEN the normalized config comes back', async () => {
    const before = await svc.receiving.get({ merchant_id: merchant.id });
    expect(before.rails).toEqual(['x402', 'mock']);
    const lower = '0xabcdefabcdefabcdefabcdefabcdefabcdefabcd';
    const put = await svc.receiving.put({ receiving: { x402: { chain: 'base-sepolia', address: lower, asset: 'usdc' }, mock: { account: 'acct_2' } } }, { merchant_id: merchant.id });
    expect(put.receiving.x402).toEqual({ chain: 'base-sepolia', address: '0xABcdEFABcdEFabcdEfAbCdefabcdeFABcDEFabCD', asset: 'USDC' });

    // The SDK's types refuse this chain; sent anyway, the server answers its own code.
    // @ts-expect-error not a supported chain
    const err = await caught(svc.receiving.put({ receiving: { x402: { chain: 'ethereum', address: lower } } }, { merchant_id: merchant.id }));
    expect(err).toBeInstanceOf(SvcValidationError);
    expect((err as SvcValidationError).reasonCodes).toEqual(['RECEIVING_CHAIN_UNSUPPORTED']);
  });
});

describe('policy', () => {
  it('GIVEN no active policy WHEN a version is put, validated and published THEN it becomes active', async () => {
    const m = await svc.merchants.create(newMerchant());
    const scope = { merchant_id: m.id };
    expect(await svc.policy.get(scope)).toEqual({ active: null, version: 0, body: null, hash: null });
    await svc.catalog.create({ sku: 'mug', name: 'Mug', price: { amount: '8.00', currency: 'USD' } }, scope);

    const v1 = await svc.policy.put({ body: { maxPerTransactionUsd: 50 }, note: 'first' }, scope);
    expect(v1).toMatchObject({ version: 1, active: false });
    expect(await svc.policy.validate(scope)).toEqual({ ok: true, findings: [] });
    expect(await svc.policy.publish(scope)).toEqual({ published: true, ok: true, active_policy_version: 1 });
    const active = await svc.policy.get(scope);
    expect(active).toMatchObject({ active: true, version: 1, hash: v1.hash, body: { maxPerTransactionUsd: 50 } });
  });

  it('GIVEN a draft with an unknown policy field WHEN published THEN SvcValidationError 422 CONFIG_INVALID carries the findings', async () => {
    const m = await svc.merchants.create(newMerchant());
    const scope = { merchant_id: m.id };
    // @ts-expect-error not a MerchantPolicy field (the SDK refuses it; sent anyway, validate and publish report it)
    await svc.policy.put({ body: { notAPolicyField: true } }, scope);
    const validation = await svc.policy.validate(scope);
    expect(validation.ok).toBe(false);
    const err = await caught(svc.policy.publish(scope));
    expect(err).toBeInstanceOf(SvcValidationError);
    const e = err as SvcValidationError;
    expect(e.status).toBe(422);
    expect(e.reasonCodes).toEqual(['CONFIG_INVALID']);
    expect(e.findings.map((f) => f.code)).toContain('POLICY_FIELD_UNKNOWN');
    expect(e.findings).toEqual(validation.findings);
  });
});

describe('ingest, orders, events, reputation', () => {
  it('GIVEN a self-hosted accepted session WHEN ingested THEN the order, its events and the agent reputation are readable', async () => {
    const agentId = randomUUID();
    const session = {
      id: `sess_ext_${randomUUID()}`,
      merchantId: merchant.id,
      agentId,
      state: 'accepted',
      verdict: { decision: 'accept' as const, tier: 'standard', reasonCodes: ['OK'] },
      total: { currency: 'USD', subtotal: '9.00', tax: '0.00', total: '9.00' },
      lines: [{ sku: 'tea', qty: 3 }],
      railName: 'x402',
    };
    expect(await svc.ingest.session({ session })).toEqual({ ok: true, session_id: session.id, persisted: true });
    const order = await svc.ingest.order({ session, receipt: RECEIPT, settlement: { reference: '0xfeed', rail: 'x402' } });
    expect(order.order_id).toMatch(/^ord_/);
    expect(order.event_ids).toHaveLength(2);

    const declined = { ...session, id: `sess_ext_${randomUUID()}`, state: 'rejected', verdict: { decision: 'reject' as const, reasonCodes: ['AGENT_BLOCKED'] } };
    const decision = await svc.ingest.decision({ session: declined });
    expect(decision).toMatchObject({ ok: true, decision: 'reject' });

    const feed = await svc.orders.list({ merchant_id: merchant.id }).page();
    expect(feed.data.find((o) => o.id === order.order_id)).toMatchObject({ session_id: session.id, settlement_ref: '0xfeed', decision: 'accept' });

    const settled = await svc.webhooks.events.list({ type: 'order.settled' }).page();
    const event = settled.data.find((e) => e.type === 'order.settled' && e.data.object.session_id === session.id);
    expect(event?.id).toMatch(/^evt_/);
    const detail = await svc.webhooks.events.get(event!.id);
    expect(detail).toMatchObject({ id: event!.id, type: 'order.settled', api_version: 'v1' });
    expect(Array.isArray(detail.deliveries)).toBe(true);

    const rep = await svc.reputation.agent(agentId);
    expect(rep).toMatchObject({ agentId, known: true });
    const mrep = await svc.reputation.merchant(merchant.id);
    expect(mrep.merchantId).toBe(merchant.id);
    expect(typeof mrep.score).toBe('number');
  });
});

describe('webhooks', () => {
  it('GIVEN a registered endpoint WHEN read, updated, rotated, listed and deleted THEN each call returns the contract body', async () => {
    const created = await svc.webhooks.endpoints.create({ url: 'http://127.0.0.1:9/hooks', enabled_events: ['order.settled'], description: 'sdk test' });
    expect(created.secret).toMatch(/^whsec_/);
    expect(created.status).toBe('pending');
    const got = await svc.webhooks.endpoints.get(created.id);
    expect(got).not.toHaveProperty('secret');
    expect(got.url).toBe('http://127.0.0.1:9/hooks');

    const disabled = await svc.webhooks.endpoints.update(created.id, { disabled: true });
    expect(disabled.status).toBe('disabled');
    const rotated = await svc.webhooks.endpoints.rotateSecret(created.id);
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    expect(rotated.previous_secret_expires_at).not.toBeNull();

    const ids: string[] = [];
    for await (const ep of svc.webhooks.endpoints.list()) ids.push(ep.id);
    expect(ids).toContain(created.id);

    const live = await svc.webhooks.endpoints.create({ url: 'http://127.0.0.1:9/other', enabled_events: ['*'] });
    const [event] = (await svc.webhooks.events.list({ limit: 1 }).page()).data;
    if (event) {
      const replay = await svc.webhooks.events.replay(event.id);
      expect(replay.event_id).toBe(event.id);
      expect(replay.deliveries.map((d) => d.endpoint_id)).toContain(live.id);
      expect(replay.deliveries.map((d) => d.endpoint_id)).not.toContain(created.id);
    } else {
      throw new Error('the ingest test should have recorded events');
    }

    await svc.webhooks.endpoints.delete(created.id);
    expect(await caught(svc.webhooks.endpoints.get(created.id))).toBeInstanceOf(SvcNotFoundError);
  });

  it('GIVEN an http URL to a public host WHEN registering THEN SvcValidationError WEBHOOK_URL_INVALID', async () => {
    const err = await caught(svc.webhooks.endpoints.create({ url: 'http://example.com/hooks', enabled_events: ['*'] }));
    expect(err).toBeInstanceOf(SvcValidationError);
    expect((err as SvcValidationError).reasonCodes).toEqual(['WEBHOOK_URL_INVALID']);
  });
});

describe('sessions', () => {
  it('GIVEN an unknown session WHEN read or approved THEN SvcNotFoundError', async () => {
    expect(await caught(svc.sessions.get('sess_00000000000000000000000000'))).toBeInstanceOf(SvcNotFoundError);
    expect(await caught(svc.sessions.approve('sess_00000000000000000000000000'))).toBeInstanceOf(SvcNotFoundError);
    expect(await caught(svc.sessions.decline('sess_00000000000000000000000000'))).toBeInstanceOf(SvcNotFoundError);
  });
});

describe('typed auth and validation errors', () => {
  it('GIVEN a revoked-looking unknown key WHEN calling THEN SvcAuthError 401 INVALID_API_KEY', async () => {
    const bogus = merchantClient(app, 'svc_test_thisisnotarealkey0000000000000000');
    const err = await caught(bogus.me.get());
    expect(err).toBeInstanceOf(SvcAuthError);
    expect((err as SvcAuthError).status).toBe(401);
    expect((err as SvcAuthError).reasonCodes).toEqual(['INVALID_API_KEY']);
  });

  it('GIVEN a key without merchants:write WHEN creating a merchant THEN SvcAuthError 403 INSUFFICIENT_SCOPE', async () => {
    const narrow = await app.key('test', { scopes: ['merchants:read'], projectId: key.projectId });
    const err = await caught(merchantClient(app, narrow).merchants.create(newMerchant()));
    expect(err).toBeInstanceOf(SvcAuthError);
    expect((err as SvcAuthError).status).toBe(403);
    expect((err as SvcAuthError).reasonCodes).toEqual(['INSUFFICIENT_SCOPE']);
  });

  it('GIVEN a body the server refuses WHEN creating THEN SvcValidationError names the field', async () => {
    const body = { ...newMerchant(), slug: 'Not A Slug' };
    const err = await caught(svc.merchants.create(body));
    expect(err).toBeInstanceOf(SvcValidationError);
    expect((err as SvcValidationError).reasonCodes).toEqual(['VALIDATION_FAILED']);
    expect((err as SvcValidationError).errorHuman).toContain('slug');
  });

  it('GIVEN an Idempotency-Key reused with another body WHEN creating THEN SvcConflictError IDEMPOTENCY_KEY_REUSED', async () => {
    const idempotencyKey = `test-${randomUUID()}`;
    const body = newMerchant();
    const first = await svc.merchants.create(body, { idempotencyKey });
    const again = await svc.merchants.create(body, { idempotencyKey });
    expect(again).toEqual(first);
    const err = await caught(svc.merchants.create(newMerchant(), { idempotencyKey }));
    expect(err).toBeInstanceOf(SvcConflictError);
    expect((err as SvcConflictError).reasonCodes).toEqual(['IDEMPOTENCY_KEY_REUSED']);
  });
});

describe('keys', () => {
  it('GIVEN a merchant client WHEN it creates, lists, rolls and revokes keys THEN each typed call works end to end', async () => {
    const admin = merchantClient(app, await app.key('test'));
    const ci = await admin.keys.create({ mode: 'test', name: 'ci', scopes: ['orders:read', 'keys:read'] });
    expect(ci).toMatchObject({ name: 'ci', restricted: true, scopes: ['orders:read', 'keys:read'] });
    const restricted = new MerchantClient({ apiKey: ci.secret, baseUrl: app.baseUrl });
    expect((await restricted.keys.list().page()).data.map((k) => k.id)).toContain(ci.id);
    const escalation = await caught(restricted.keys.create({ mode: 'test' }));
    expect(escalation).toBeInstanceOf(SvcApiError);
    expect((escalation as SvcApiError).reasonCodes).toEqual(['INSUFFICIENT_SCOPE']);

    const rolled = await admin.keys.roll(ci.id, { grace_period_seconds: 0 });
    expect(rolled.secret).not.toBe(ci.secret);
    expect(await caught(restricted.me.get())).toBeInstanceOf(SvcAuthError);
    const revoked = await admin.keys.revoke(rolled.id);
    expect(revoked.revoked_at).not.toBeNull();
    const ids: string[] = [];
    for await (const k of admin.keys.list({ limit: 1 })) ids.push(k.id);
    expect(ids).toEqual(expect.arrayContaining([ci.id, rolled.id]));
  });
});

describe('namespaces derived from the contract (sdk/src/resource.ts)', () => {
  it('GIVEN the table of operations WHEN path parameters, an omitted optional body and per-call options are given THEN each reaches its route as the hand-written methods sent it', async () => {
    const urls: string[] = [];
    const recording = new MerchantClient({
      apiKey: key.secret,
      baseUrl: app.baseUrl,
      fetch: (input, init) => {
        urls.push(`${init.method} ${input}`);
        return fetch(input, init);
      },
    });

    // An empty path parameter would address another route: refused before any request.
    await expect(recording.merchants.get('')).rejects.toThrow(new TypeError('id must be a non-empty string'));
    await expect(recording.catalog.update('', { name: 'x' })).rejects.toThrow(new TypeError('sku must be a non-empty string'));
    expect(urls).toEqual([]);

    // A path parameter is one segment, percent-encoded.
    expect(await caught(recording.merchants.get('mrch_a/b'))).toBeInstanceOf(SvcNotFoundError);
    expect(urls).toEqual([`GET ${app.baseUrl}/v1/merchants/mrch_a%2Fb`]);

    // Query parameters of a merchant-level route ride in the options, beside the per-call controls.
    urls.length = 0;
    await recording.catalog.list({ merchant_id: merchant.id, available: 'false', timeoutMs: 10_000 });
    expect(urls).toEqual([`GET ${app.baseUrl}/v1/catalog?merchant_id=${merchant.id}&available=false`]);

    // keys.roll may leave its body out: {} is sent, so the default grace period applies.
    const spare = await recording.keys.create({ mode: 'test', name: 'spare', scopes: ['orders:read'] });
    const rolled = await recording.keys.roll(spare.id);
    expect(rolled.id).not.toBe(spare.id);
    const old = (await recording.keys.list({ limit: 100 }).toArray({ max: 500 })).find((k) => k.id === spare.id);
    expect(old?.rolled_to).toBe(rolled.id);
    expect(old?.expires_at).not.toBeNull();
  });
});

describe('dashboard reads: order filters and summary, events of an order, policy versions, endpoint test', () => {
  it('GIVEN orders, versions and an endpoint of a fresh project WHEN read through the SDK THEN each new call returns the contract body', async () => {
    const dash = merchantClient(app, await app.key('test'));
    const m = await dash.merchants.create(newMerchant());
    const scope = { merchant_id: m.id };
    const report = async (decision: 'accept' | 'reject', total: string) => {
      const session = {
        id: `sess_ext_${randomUUID()}`,
        merchantId: m.id,
        agentId: randomUUID(),
        state: decision === 'accept' ? 'accepted' : 'rejected',
        verdict: { decision, tier: decision === 'accept' ? 'trusted' : 'cautious', reasonCodes: ['OK'] },
        total: { currency: 'USD', subtotal: total, tax: '0.00', total },
        lines: [{ sku: 'tea', qty: 1 }],
        railName: 'x402',
      };
      if (decision === 'accept') return (await dash.ingest.order({ session, receipt: RECEIPT, settlement: { reference: '0xfeed', rail: 'x402' } })).order_id!;
      await dash.ingest.decision({ session });
      return (await dash.orders.list({ decision: 'reject', limit: 1 }).page()).data[0]!.id;
    };
    const accepted = await report('accept', '0.10');
    await report('accept', '0.20');
    const rejected = await report('reject', '3.00');

    const filtered = await dash.orders.list({ decision: 'accept', trust_tier: 'trusted', ...scope }).toArray({ max: 10 });
    expect(filtered.map((o) => o.decision)).toEqual(['accept', 'accept']);
    expect(await dash.orders.list({ decision: 'reject' }).toArray({ max: 10 })).toEqual([expect.objectContaining({ id: rejected })]);

    const summary = await dash.orders.summary({ tz: 'Europe/Paris', ...scope });
    expect(summary).toMatchObject({ currency: 'USDC', today: { accepted_volume: '0.30', accepted_count: 2, orders_by_decision: { accept: 2, reject: 1, hold: 0 } } });
    expect(summary.days).toHaveLength(14);
    const badZone = await caught(dash.orders.summary({ tz: 'Mars/Olympus' }));
    expect(badZone).toBeInstanceOf(SvcValidationError);
    expect((badZone as SvcValidationError).reasonCodes).toEqual(['VALIDATION_FAILED']);

    const events = await dash.webhooks.events.list({ order_id: accepted }).toArray({ max: 10 });
    expect(events.map((e) => e.type)).toEqual(['order.settled', 'order.accepted']);

    await dash.policy.put({ body: { maxPerTransactionUsd: 10 }, note: 'v1' }, scope);
    await dash.policy.put({ body: { maxPerTransactionUsd: 20 } }, scope);
    const versions = await dash.policy.versions({ ...scope, limit: 1 }).toArray({ max: 10 });
    expect(versions.map((v) => [v.version, v.active, v.body, v.note])).toEqual([
      [2, false, { maxPerTransactionUsd: 20 }, null],
      [1, false, { maxPerTransactionUsd: 10 }, 'v1'],
    ]);

    const ep = await dash.webhooks.endpoints.create({ url: 'http://127.0.0.1:9/dash', enabled_events: ['order.settled'] });
    const sent = await dash.webhooks.endpoints.sendTestEvent(ep.id);
    expect(sent).toEqual({ event_id: expect.stringMatching(/^evt_/), deliveries: [{ endpoint_id: ep.id, status: 'pending' }] });
    const detail = await dash.webhooks.events.get(sent.event_id);
    expect(detail.type).toBe('webhook_endpoint.test');
    if (detail.type === 'webhook_endpoint.test') expect(detail.data.object).toEqual({ id: ep.id, object: 'webhook_endpoint', url: 'http://127.0.0.1:9/dash' });
    expect(detail.deliveries.map((d) => d.endpoint_id)).toEqual([ep.id]);
    await dash.webhooks.endpoints.update(ep.id, { disabled: true });
    const refused = await caught(dash.webhooks.endpoints.sendTestEvent(ep.id));
    expect(refused).toBeInstanceOf(SvcConflictError);
    expect((refused as SvcConflictError).reasonCodes).toEqual(['WEBHOOK_ENDPOINT_DISABLED']);
  });
});
