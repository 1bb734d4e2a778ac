import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { expectError, onPostgres, sql } from './helpers/foundation.js';
import { TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

const NEUTRAL = { score: 500, tier: 'standard', known: false };

async function buy(base: string, agent: string, qty = 1) {
  const s = await openSession(app, base, [{ sku: 'coffee', qty }], { agent_id: agent });
  return (await payX402(app, base, s, newBuyer())).res;
}

describe('reputation deltas', () => {
  it('GIVEN an accepted purchase WHEN reputation is read THEN the agent is +10 (510) and the merchant +2 (502); a rejection is -15', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null, maxPerTransactionUsd: 5 } });
    expect(await app.request('GET', `/v1/reputation/merchant/${merchant.id}`).then((r) => r.body)).toEqual({ merchantId: merchant.id, ...NEUTRAL });

    const agent = agentId();
    expect((await buy(base, agent)).status).toBe(200);
    const rep = await app.request('GET', `/v1/reputation/agent/${agent}`, { key });
    expect(rep.status).toBe(200);
    expect(rep.body).toEqual({ agentId: agent, score: 510, tier: 'standard', known: true });
    // A merchant's score is read in the merchant's own mode, with a key or without.
    expect((await app.request('GET', `/v1/reputation/merchant/${merchant.id}`)).body).toEqual({ merchantId: merchant.id, score: 502, tier: 'standard', known: true });

    // Two coffees are 9.00, over the 5 USD cap: rejected.
    expect((await buy(base, agent, 2)).status).toBe(403);
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body.score).toBe(495);
    // The merchant gains nothing from a rejection.
    expect((await app.request('GET', `/v1/reputation/merchant/${merchant.id}`, { key })).body.score).toBe(502);

    // The short form reads the same record.
    expect((await app.request('GET', `/v1/reputation/${agent}`, { key })).body).toEqual({ agentId: agent, score: 495, tier: 'standard', known: true });
  });

  it('GIVEN enough accepted purchases WHEN the score crosses 520 THEN the tier is trusted', async () => {
    const { key, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    for (let i = 0; i < 2; i++) expect((await buy(base, agent)).status).toBe(200);
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body).toMatchObject({ score: 520, tier: 'trusted' });
  });
});

/** A signed-in member's session cookie, through the sign-in link (outside production the start answers its token). */
async function signedInCookie(): Promise<string> {
  const started = await app.request('POST', '/v1/auth/email/start', { body: { email: `rep-${agentId()}@example.com` } });
  expect(started.status, started.text).toBe(200);
  const verified = await app.request('POST', '/v1/auth/verify', {
    rawBody: new URLSearchParams({ token: started.body.dev_token }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
  });
  const cookie = /svc_session=([^;]+)/.exec(verified.headers.get('set-cookie') ?? '')?.[1];
  expect(cookie, verified.text).toBeTruthy();
  return cookie!;
}

describe('reputation per mode (issue 24.2)', () => {
  it('GIVEN an accepted test-mode purchase WHEN each kind of reader reads the agent THEN test keys and a test-mode dashboard session read 510, while live keys, live sessions and readers without a key read the live score', async () => {
    const { key, merchant, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    expect((await buy(base, agent)).status).toBe(200);
    const inTest = { agentId: agent, score: 510, tier: 'standard', known: true };
    const inLive = { agentId: agent, ...NEUTRAL };

    const otherTest = await app.key('test');
    const live = await app.key('live', { projectId: key.projectId });
    const cookie = `svc_session=${await signedInCookie()}`;
    const readers: Array<[string, { key?: typeof key; headers?: Record<string, string> }, unknown]> = [
      ['the merchant\'s test key', { key }, inTest],
      ['another project\'s test key', { key: otherTest }, inTest],
      ['the project\'s live key', { key: live }, inLive],
      ['no key', {}, inLive],
      ['a test-mode dashboard session', { headers: { cookie, 'svc-mode': 'test' } }, inTest],
      ['a live-mode dashboard session', { headers: { cookie, 'svc-mode': 'live' } }, inLive],
    ];
    for (const [who, opts, expected] of readers) {
      const res = await app.request('GET', `/v1/reputation/agent/${agent}`, opts);
      expect(res.status, who).toBe(200);
      expect(res.body, who).toEqual(expected);
    }
    // The merchant is a test merchant: its score is its test score for every reader.
    for (const opts of [{}, { key: live }]) {
      expect((await app.request('GET', `/v1/reputation/merchant/${merchant.id}`, opts)).body).toEqual({ merchantId: merchant.id, score: 502, tier: 'standard', known: true });
    }
    // One row per mode the agent has history in, and this one has only test history.
    expect(await sql(app, 'select livemode, score from reputation where subject_type = ? and subject_id = ?', ['agent', agent])).toEqual([{ livemode: false, score: 510 }]);
  });
});

describe('reputation routes', () => {
  it('GIVEN an agent that paid WHEN its UUID is looked up in upper case on any route THEN the same record answers (UUIDs are case-insensitive)', async () => {
    const { key, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    expect((await buy(base, agent.toUpperCase())).status).toBe(200);
    for (const id of [agent, agent.toUpperCase()]) {
      for (const path of [`/v1/reputation/agent/${id}`, `/v1/reputation/${id}`, `/api/v1/reputation/${id}/`]) {
        const res = await app.request('GET', path, { key });
        expect(res.body, path).toEqual({ agentId: id, score: 510, tier: 'standard', known: true });
      }
    }
    // The next purchase under another spelling builds on the same record.
    expect((await buy(base, agent)).status).toBe(200);
    expect((await app.request('GET', `/v1/reputation/agent/${agent.toUpperCase()}`, { key })).body.score).toBe(520);
  });

  it('GIVEN the legacy alias WHEN it is called with or without a trailing slash and with X-Svc-Api-Key valid, garbage or absent THEN 200: the key\'s mode for a valid key, the live score otherwise', async () => {
    const { key, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    expect((await buy(base, agent)).status).toBe(200);
    const inTest = { agentId: agent, score: 510, tier: 'standard', known: true };
    const inLive = { agentId: agent, ...NEUTRAL };
    for (const path of [`/api/v1/reputation/${agent}`, `/api/v1/reputation/${agent}/`]) {
      const cases: Array<[Record<string, string>, unknown]> = [
        [{ 'x-svc-api-key': key.secret }, inTest],
        [{}, inLive],
        [{ 'x-svc-api-key': 'garbage' }, inLive],
        [{ 'x-svc-api-key': 'svc_test_0000000000000000000000000000000000000000000' }, inLive],
      ];
      for (const [headers, expected] of cases) {
        const res = await app.request('GET', path, { headers });
        expect(res.status, `${path} ${JSON.stringify(headers)}`).toBe(200);
        expect(res.body).toEqual(expected);
      }
    }
    // A bad Authorization header does not matter on the public routes either: it reads as no key.
    const withBearer = await app.request('GET', `/v1/reputation/agent/${agent}`, { key: 'svc_test_nope' });
    expect(withBearer.status).toBe(200);
    expect(withBearer.body).toEqual(inLive);
  });

  it('GIVEN ids with no history WHEN they are looked up THEN 200 neutral on every route, never 404', async () => {
    const unknownAgent = agentId();
    for (const path of [`/v1/reputation/agent/${unknownAgent}`, `/v1/reputation/${unknownAgent}`, `/api/v1/reputation/${unknownAgent}`, `/api/v1/reputation/${unknownAgent}/`]) {
      const res = await app.request('GET', path);
      expect(res.status, path).toBe(200);
      expect(res.body).toEqual({ agentId: unknownAgent, ...NEUTRAL });
    }
    // Not a UUID is still just an id nobody knows.
    expect((await app.request('GET', '/v1/reputation/agent/not-a-uuid')).body).toEqual({ agentId: 'not-a-uuid', ...NEUTRAL });
    const m = `mrch_${ulid().toLowerCase()}`;
    expect((await app.request('GET', `/v1/reputation/merchant/${m}`)).body).toEqual({ merchantId: m, ...NEUTRAL });
  });

  it('GIVEN the reserved literals WHEN /v1/reputation/agent or /v1/reputation/merchant is called with no id THEN 400 VALIDATION_FAILED pointing at the full forms', async () => {
    for (const path of ['/v1/reputation/agent', '/v1/reputation/merchant', '/v1/reputation/Agent', '/v1/reputation/merchant/', '/api/v1/reputation/agent', '/api/v1/reputation/merchant/']) {
      const res = await app.request('GET', path);
      expectError(res, 400, 'VALIDATION_FAILED');
      expect(res.body.error_human, path).toContain('/v1/reputation/agent/<agentId>');
    }
  });

  it('GIVEN a database that hangs WHEN reputation is read THEN the route still answers 200 neutral', async () => {
    const { key, base } = await publishedMerchant(app, { policy: { holdForReviewBelowTier: null, requireMandateOverUsd: null } });
    const agent = agentId();
    expect((await buy(base, agent)).status).toBe(200);
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body.score).toBe(510);

    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    let holder: Promise<unknown>;
    let locked: Promise<void>;
    if (onPostgres) {
      // Another session holds an exclusive lock on the table, so the read blocks.
      const client = new pg.Client({ connectionString: (app.target as { url: string }).url });
      await client.connect();
      await client.query('begin');
      await client.query('lock table reputation in access exclusive mode');
      locked = Promise.resolve();
      holder = released.then(async () => {
        await client.query('rollback');
        await client.end();
      });
    } else {
      // PGlite is one session: an open transaction makes every other query wait behind it.
      let entered!: () => void;
      locked = new Promise<void>((r) => (entered = r));
      holder = app.services.orm.em.fork().transactional(async (tx) => {
        await tx.execute('select 1');
        entered();
        await released;
      });
    }
    await locked;
    try {
      const hung = await Promise.all([
        app.request('GET', `/v1/reputation/agent/${agent}`, { key }),
        app.request('GET', `/api/v1/reputation/${agent}/`, { headers: { 'x-svc-api-key': key.secret } }),
      ]);
      for (const res of hung) {
        expect(res.status).toBe(200);
        expect(res.body).toEqual({ agentId: agent, ...NEUTRAL });
      }
    } finally {
      release();
      await holder;
    }
    // Once the database answers again, the real record is back.
    expect((await app.request('GET', `/v1/reputation/agent/${agent}`, { key })).body.score).toBe(510);
  });
});
