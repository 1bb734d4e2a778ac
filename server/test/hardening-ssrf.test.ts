import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ulid } from 'ulid';
import { loadConfig } from '../src/config.js';
import { outboundRules, type Resolver } from '../src/lib/ssrf.js';
import { ISSUER_UNAVAILABLE_HUMAN } from '../src/modules/gate/mandate.js';
import { createAgents, NON_PUBLIC_FAILURE, postWebhook } from '../src/modules/webhooks/deliver.js';
import { startWebhookWorker, type WebhookWorker } from '../src/modules/webhooks/worker.js';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { MandateIssuer, openSession, payX402 } from './helpers/agent-protocol.js';
import { sql } from './helpers/foundation.js';
import { expectErrorShape, merchantBody, TestApp, type TestKey } from './helpers/harness.js';
import { MAIN, runScript } from './helpers/spawn.js';
import { createEndpoint, recordEvents, waitUntil } from './helpers/webhooks.js';

/**
 * Issue 24 item 4: SSRF and a port-scan oracle. Three apps: outside production (NODE_ENV=test,
 * the harness default), outside production with SVC_ALLOW_PRIVATE_URLS=true, and with the
 * production rules (NODE_ENV=production). A loopback listener stands for "something on the
 * server's machine" and counts every TCP connection it gets.
 */

/** Counts connections (any protocol) and answers HTTP 200: the target that must not be reached. */
let listener: http.Server;
let connections = 0;
let P = 0;
let dev: TestApp;
let prod: TestApp;
let open: TestApp;
let issuer: MandateIssuer;

const listen = async (server: net.Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return (server.address() as AddressInfo).port;
};
const close = (server: net.Server) =>
  new Promise<void>((resolve) => {
    if (server instanceof http.Server) server.closeAllConnections();
    server.close(() => resolve());
  });

beforeAll(async () => {
  listener = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('ok'));
  listener.on('connection', () => (connections += 1));
  P = await listen(listener);
  dev = await TestApp.start();
  open = await TestApp.start({ SVC_ALLOW_PRIVATE_URLS: 'true' });
  prod = await TestApp.start({ NODE_ENV: 'production', SVC_PUBLIC_BASE_URL: 'https://checkout.example.com' });
  issuer = await MandateIssuer.start();
}, 120_000);
afterAll(async () => {
  await Promise.all([dev?.stop(), open?.stop(), prod?.stop()]);
  await issuer?.stop();
  if (listener) await close(listener);
});

/**
 * L: a loopback receiver in a canonical form (127.0.0.0/8 in any IPv4 spelling, [::1], localhost).
 * X: anything else that is not public: every other encoding of loopback (IPv4-mapped,
 *    -compatible, NAT64, 6to4, Teredo, SIIT), unspecified, metadata, link-local, private, CGNAT,
 *    ULA, site-local, multicast, reserved, documentation, local names.
 * P: public, https. H: public, http.
 */
type Kind = 'L' | 'X' | 'P' | 'H';
const FORMS = (): Array<[Kind, string]> => [
  // loopback, canonical, in every spelling the WHATWG URL parser turns into 127.x.y.z
  ['L', `http://127.0.0.1:${P}/h`],
  ['L', `https://127.0.0.1:${P}/h`],
  ['L', `http://localhost:${P}/h`],
  ['L', `https://localhost:${P}/h`],
  ['L', `http://LOCALHOST:${P}/h`],
  ['L', `http://localhost.:${P}/h`],
  ['L', `http://api.localhost:${P}/h`],
  ['L', `http://[::1]:${P}/h`],
  ['L', `https://[::1]:${P}/h`],
  ['L', `http://[0:0:0:0:0:0:0:1]:${P}/h`],
  ['L', `http://127.1:${P}/h`],
  ['L', `http://127.0.1:${P}/h`],
  ['L', `http://2130706433:${P}/h`],
  ['L', `https://2130706433:${P}/h`],
  ['L', `http://0x7f000001:${P}/h`],
  ['L', `http://0x7f.0x0.0x0.0x1:${P}/h`],
  ['L', `http://0x7f.1:${P}/h`],
  ['L', `http://0177.0.0.1:${P}/h`],
  ['L', `http://017700000001:${P}/h`],
  ['L', `http://127.000.000.001:${P}/h`],
  ['L', `http://127.0.0.1.:${P}/h`],
  ['L', `http://%31%32%37.0.0.1:${P}/h`],
  ['L', `http://１２７.０.０.１:${P}/h`],
  ['L', `http://127.255.255.254:${P}/h`],
  ['L', `http://127.127.127.127:${P}/h`],
  // loopback carried by IPv6 forms: not loopback, refused
  ['X', `http://[::ffff:127.0.0.1]:${P}/h`],
  ['X', `https://[::ffff:127.0.0.1]:${P}/h`],
  ['X', `http://[::ffff:7f00:1]:${P}/h`],
  ['X', `http://[0:0:0:0:0:ffff:127.0.0.1]:${P}/h`],
  ['X', `http://[::127.0.0.1]:${P}/h`],
  ['X', `http://[::7f00:1]:${P}/h`],
  ['X', `http://[64:ff9b::127.0.0.1]:${P}/h`],
  ['X', `http://[2002:7f00:1::]:${P}/h`],
  ['X', `http://[::ffff:0:127.0.0.1]:${P}/h`],
  ['X', `http://[2001:0:7f00:1::]:${P}/h`],
  // unspecified (connects to this machine)
  ['X', `http://0.0.0.0:${P}/h`],
  ['X', `https://0.0.0.0:${P}/h`],
  ['X', `http://0:${P}/h`],
  ['X', `http://0x0:${P}/h`],
  ['X', `http://000.000.000.000:${P}/h`],
  ['X', `http://[::]:${P}/h`],
  ['X', `https://[::]:${P}/h`],
  ['X', `http://[0:0:0:0:0:0:0:0]:${P}/h`],
  ['X', `http://[::ffff:0.0.0.0]:${P}/h`],
  // cloud metadata and link-local
  ['X', 'http://169.254.169.254/latest/meta-data/'],
  ['X', 'https://169.254.169.254/latest/meta-data/'],
  ['X', 'http://2852039166/latest'],
  ['X', 'http://0xa9fea9fe/latest'],
  ['X', 'http://0251.0376.0251.0376/latest'],
  ['X', 'http://169.254.43518/latest'],
  ['X', 'http://0xa9.0xfe.0xa9.0xfe/latest'],
  ['X', 'http://[::ffff:169.254.169.254]/latest'],
  ['X', 'https://[::ffff:a9fe:a9fe]/latest'],
  ['X', 'https://[fd00:ec2::254]/latest'],
  ['X', 'https://[64:ff9b::a9fe:a9fe]/latest'],
  ['X', 'https://[2002:a9fe:a9fe::]/latest'],
  ['X', 'https://169.254.0.1/h'],
  ['X', 'https://[fe80::1]/h'],
  ['X', 'https://[fe80::a9fe:a9fe]/h'],
  ['X', 'http://metadata.google.internal/computeMetadata/v1/'],
  ['X', 'https://100.100.100.200/latest'],
  // private
  ['X', 'https://10.0.0.1/h'],
  ['X', 'http://10.0.0.1/h'],
  ['X', 'https://10.1/h'],
  ['X', 'https://167772161/h'],
  ['X', 'https://0x0a000001/h'],
  ['X', 'https://012.0.0.1/h'],
  ['X', 'https://[::ffff:10.0.0.1]/h'],
  ['X', 'https://172.16.0.1/h'],
  ['X', 'https://172.31.255.254/h'],
  ['X', 'https://[::ffff:172.16.0.1]/h'],
  ['X', 'https://192.168.0.1/h'],
  ['X', 'https://192.168.1.1/h'],
  ['X', 'https://3232235777/h'],
  ['X', 'https://[::ffff:192.168.1.1]/h'],
  ['X', 'https://100.64.0.1/h'],
  ['X', 'https://[fc00::1]/h'],
  ['X', 'https://[fd12:3456:789a::1]/h'],
  ['X', 'https://[fec0::1]/h'],
  // multicast, broadcast, reserved, documentation, discard
  ['X', 'https://224.0.0.1/h'],
  ['X', 'https://239.255.255.250/h'],
  ['X', 'https://[ff02::1]/h'],
  ['X', 'https://240.0.0.1/h'],
  ['X', 'https://255.255.255.255/h'],
  ['X', 'https://192.0.2.1/h'],
  ['X', 'https://198.18.0.1/h'],
  ['X', 'https://[2001:db8::1]/h'],
  ['X', 'https://[100::1]/h'],
  // local names
  ['X', 'https://intranet/h'],
  ['X', 'https://printer.local/h'],
  ['X', 'https://db.internal/h'],
  // public
  ['P', 'https://hooks.example.com/h'],
  ['P', 'https://93.184.216.34/h'],
  ['P', 'https://[2606:4700:4700::1111]/h'],
  ['P', 'https://[::ffff:8.8.8.8]/h'],
  ['H', 'http://hooks.example.com/h'],
];

type Setting = { name: string; app: () => TestApp; mode: 'test' | 'live'; accepts: Kind[] };
const SETTINGS: Setting[] = [
  { name: 'outside production, test key', app: () => dev, mode: 'test', accepts: ['L', 'P'] },
  { name: 'outside production, live key', app: () => dev, mode: 'live', accepts: ['P'] },
  { name: 'SVC_ALLOW_PRIVATE_URLS=true, test key', app: () => open, mode: 'test', accepts: ['L', 'X', 'P', 'H'] },
  { name: 'SVC_ALLOW_PRIVATE_URLS=true, live key', app: () => open, mode: 'live', accepts: ['P'] },
  { name: 'production, test key', app: () => prod, mode: 'test', accepts: ['P'] },
  { name: 'production, live key', app: () => prod, mode: 'live', accepts: ['P'] },
];

const EP = '/v1/webhooks/endpoints';
const LIVE_RECEIVING = { receiving: { x402: { chain: 'base', address: '0x2222222222222222222222222222222222222222' } } };

describe('write time: every URL form against endpoint create/update and trusted_svc_jwks_url, per mode and environment', () => {
  it('GIVEN the table of forms WHEN each is registered THEN it is accepted exactly where its kind is allowed, refused with the error shape elsewhere; nothing is connected to', async () => {
    const forms = FORMS();
    expect(forms.length).toBeGreaterThanOrEqual(94);
    const wrong: string[] = [];
    // The settings side by side (three apps, three databases), each form in turn within one.
    await Promise.all(
      SETTINGS.map(async (s) => {
        const app = s.app();
        const key = await app.key(s.mode);
        const existing = await createEndpoint(app, key, 'https://hooks.example.com/existing');
        const merchant = await app.request('POST', '/v1/merchants', { key, body: merchantBody(s.mode === 'live' ? LIVE_RECEIVING : {}) });
        expect(merchant.status, merchant.text).toBe(201);
        for (const [kind, url] of forms) {
          const want = s.accepts.includes(kind);
          const created = await app.request('POST', EP, { key, body: { url, enabled_events: ['*'] } });
          const updated = await app.request('PATCH', `${EP}/${existing.id}`, { key, body: { url } });
          const jwks = await app.request('PATCH', `/v1/merchants/${merchant.body.id}`, { key, body: { trusted_svc_jwks_url: url } });
          const got = [created.status, updated.status, jwks.status];
          const expected = want ? [201, 200, 200] : [400, 400, 400];
          if (got.join() !== expected.join()) {
            wrong.push(`${s.name} ${kind} ${url}: ${got.join()} (want ${expected.join()}) ${created.text}`);
            continue;
          }
          if (want) {
            if (created.status === 201) expect((await app.request('DELETE', `${EP}/${created.body.id}`, { key })).status).toBe(204);
            continue;
          }
          for (const r of [created, updated, jwks]) expectErrorShape(r.body);
          expect(created.body.reason_codes).toEqual(['WEBHOOK_URL_INVALID']);
          expect(created.body.error_human).toMatch(/^url: /);
          expect(updated.body.reason_codes).toEqual(['WEBHOOK_URL_INVALID']);
          expect(jwks.body.reason_codes).toEqual(['VALIDATION_FAILED']);
          expect(jwks.body.error_human).toMatch(/^trusted_svc_jwks_url: /);
        }
      }),
    );
    expect(wrong).toEqual([]);
    expect(connections).toBe(0);
  }, 600_000);
});

/** Endpoints of one project whose stored URLs are `urls` (rows written before a rule, or in another environment). */
async function endpointsAt(app: TestApp, mode: 'test' | 'live', urls: string[]): Promise<Array<{ key: TestKey; id: string; url: string }>> {
  const out: Array<{ key: TestKey; id: string; url: string }> = [];
  for (let i = 0; i < urls.length; i += 16) {
    const key = await app.key(mode);
    for (const url of urls.slice(i, i + 16)) {
      const { id } = await createEndpoint(app, key, `https://hooks-${ulid().toLowerCase()}.example.com/h`);
      await sql(app, 'update webhook_endpoints set url = ? where id = ?', [url, id]);
      out.push({ key, id, url });
    }
  }
  return out;
}

async function firstAttempts(app: TestApp, eps: Array<{ key: TestKey; id: string; url: string }>, events: Map<string, string>) {
  const out = new Map<string, any>();
  await waitUntil(async () => {
    for (const ep of eps) {
      if (out.has(ep.id)) continue;
      const res = await app.request('GET', `/v1/events/${events.get(ep.key.projectId)}`, { key: ep.key });
      const d = res.body.deliveries.find((x: any) => x.endpoint_id === ep.id);
      const a = d?.attempts.find((x: any) => x.status !== 'in_progress');
      if (a) out.set(ep.id, a);
    }
    return out.size === eps.length;
  }, 'a finished first attempt at every endpoint', 120_000);
  return out;
}

async function deliverOnce(app: TestApp, eps: Array<{ key: TestKey; id: string; url: string }>, timeoutMs: number) {
  const events = new Map<string, string>();
  for (const key of new Map(eps.map((e) => [e.key.projectId, e.key])).values()) {
    const [ev] = await recordEvents(app, key, ['order.settled']);
    events.set(key.projectId, ev!.id);
  }
  const worker: WebhookWorker = startWebhookWorker(app.services, { pollIntervalMs: 20, timeoutMs });
  try {
    return await firstAttempts(app, eps, events);
  } finally {
    await worker.stop();
  }
}

describe('connect time: stored URLs are checked again where the socket connects', () => {
  it('GIVEN production WHEN endpoints (test and live) hold every loopback and non-public form of the listener THEN each attempt is refused without an address and the listener is never reached', async () => {
    const urls = FORMS()
      .filter(([kind, url]) => (kind === 'L' || kind === 'X') && url.includes(`:${P}/`))
      .map(([, url]) => url);
    const eps = [...(await endpointsAt(prod, 'test', urls)), ...(await endpointsAt(prod, 'live', urls))];
    const before = connections;
    const attempts = await deliverOnce(prod, eps, 2_000);
    for (const ep of eps) {
      expect(attempts.get(ep.id), ep.url).toMatchObject({ status: 'failed', response_status: null, error: 'refused: the host is not a public address' });
    }
    expect(connections - before).toBe(0);
  }, 300_000);

  it('GIVEN outside production WHEN test endpoints hold the non-loopback forms of the listener THEN refused and never reached, while the canonical loopback URL is delivered', async () => {
    const urls = FORMS()
      .filter(([kind, url]) => kind === 'X' && url.includes(`:${P}/`))
      .map(([, url]) => url);
    const eps = await endpointsAt(dev, 'test', urls);
    const before = connections;
    const attempts = await deliverOnce(dev, eps, 2_000);
    for (const ep of eps) {
      expect(attempts.get(ep.id), ep.url).toMatchObject({ status: 'failed', response_status: null, error: 'refused: the host is not a public or loopback address' });
    }
    expect(connections - before).toBe(0);

    // The walk-through's receiver still works: loopback is allowed outside production.
    const [ok] = await endpointsAt(dev, 'test', [`http://localhost:${P}/walkthrough`]);
    const delivered = await deliverOnce(dev, [ok!], 10_000);
    expect(delivered.get(ok!.id)).toMatchObject({ status: 'succeeded', response_status: 200, error: null });
    expect(connections - before).toBeGreaterThan(0);
  }, 300_000);

  it('GIVEN a keep-alive socket opened to a loopback name under the test rules WHEN a live delivery to the same host and port resolves to a public address THEN the pooled socket is not reused: refused, the listener gets one request', async () => {
    let requests = 0;
    const counting = http.createServer({ keepAlive: true }, (_req, res) => {
      requests += 1;
      res.writeHead(200).end('ok');
    });
    const port = await listen(counting);
    const agents = createAgents();
    const name = `rebind-${ulid().toLowerCase()}.example.com`;
    // DNS is outside the machine: the name first answers loopback, then a public address (rebinding).
    const answer =
      (address: string): Resolver =>
      (_host, cb) =>
        cb(null, [{ address, family: 4 }]);
    const base = { url: `http://${name}:${port}/h`, body: '{}', headers: { 'content-type': 'application/json' }, timeoutMs: 2_000 };
    try {
      const first = await postWebhook({ ...base, rules: outboundRules(dev.config, false), resolve: answer('127.0.0.1') }, agents);
      expect(first).toMatchObject({ ok: true, responseStatus: 200 });
      const second = await postWebhook({ ...base, rules: outboundRules(dev.config, true), resolve: answer('93.184.216.34') }, agents);
      expect(second).toMatchObject({ ok: false, responseStatus: null, error: 'refused: the host is not a public address' });
      expect(requests).toBe(1);
    } finally {
      agents.http.destroy();
      agents.https.destroy();
      await close(counting);
    }
  });
});

/** Four ways a loopback port can fail, which today's records and timings tell apart. */
async function portStates() {
  const closedServer = net.createServer();
  const closedPort = await listen(closedServer);
  await close(closedServer);
  const notFound = http.createServer((_req, res) => res.writeHead(404).end('not here'));
  const hangUp = net.createServer((socket) => socket.once('data', () => socket.destroy()));
  const silent = net.createServer(() => undefined);
  const silentSockets: net.Socket[] = [];
  silent.on('connection', (s) => silentSockets.push(s));
  const ports = { closed: closedPort, notFound: await listen(notFound), hangUp: await listen(hangUp), silent: await listen(silent) };
  return {
    ports,
    async stop() {
      for (const s of silentSockets) s.destroy();
      await Promise.all([close(notFound), close(hangUp), close(silent)]);
    },
  };
}

describe('no port state in delivery records or answer times', () => {
  it('GIVEN test endpoints at a closed port, an HTTP port answering 404, a port that hangs up and a silent port WHEN delivered THEN every attempt records the same failure, no status and the full budget, and none is recorded before half the budget has passed', async () => {
    const states = await portStates();
    const budget = 1_500;
    try {
      const urls = [
        `http://127.0.0.1:${states.ports.closed}/h`,
        `http://localhost:${states.ports.closed}/h`,
        `http://127.0.0.1:${states.ports.notFound}/h`,
        `http://127.0.0.1:${states.ports.hangUp}/h`,
        `http://127.0.0.1:${states.ports.silent}/h`,
      ];
      const key = await dev.key('test');
      const eps: Array<{ key: TestKey; id: string; url: string }> = [];
      for (const url of urls) eps.push({ key, id: (await createEndpoint(dev, key, url)).id, url });
      const [ev] = await recordEvents(dev, key, ['order.settled']);
      // Ordering, not a duration: this timer's callback runs before any padded outcome's (same event loop, earlier deadline).
      let halfBudgetPassed = false;
      const half = setTimeout(() => (halfBudgetPassed = true), budget / 2);
      const worker = startWebhookWorker(dev.services, { pollIntervalMs: 20, timeoutMs: budget });
      let sawFirstFailure: boolean | null = null;
      try {
        const detail = await waitUntil(async () => {
          const res = await dev.request('GET', `/v1/events/${ev!.id}`, { key });
          const finished = res.body.deliveries.filter((d: any) => d.attempts.some((a: any) => a.status === 'failed'));
          if (finished.length > 0 && sawFirstFailure === null) sawFirstFailure = halfBudgetPassed;
          return finished.length === urls.length ? res.body : null;
        }, 'a failed attempt at every endpoint', 60_000);
        expect(sawFirstFailure).toBe(true);
        const records = detail.deliveries.map((d: any) => {
          expect(d.attempts).toHaveLength(1);
          const { status, response_status, duration_ms, error } = d.attempts[0];
          return { status, response_status, duration_ms, error };
        });
        expect(records).toEqual(urls.map(() => ({ status: 'failed', response_status: null, duration_ms: budget, error: NON_PUBLIC_FAILURE })));
        expect(JSON.stringify(detail)).not.toMatch(/ECONNREFUSED|socket hang up|HTTP 404|timed out|127\.0\.0\.1/);
      } finally {
        clearTimeout(half);
        await worker.stop();
      }
    } finally {
      await states.stop();
    }
  }, 120_000);

  it('GIVEN test merchants whose issuer JWKS is a closed port, a 404, a hang-up, a silent port or a refused address WHEN agents settle with a mandate THEN each answers the same 403 MANDATE_ISSUER_UNAVAILABLE, none before half the 2 s budget, and the refused address is never reached', async () => {
    const states = await portStates();
    try {
      const jwks = {
        closed: `http://127.0.0.1:${states.ports.closed}/jwks`,
        notFound: `http://127.0.0.1:${states.ports.notFound}/jwks`,
        hangUp: `http://127.0.0.1:${states.ports.hangUp}/jwks`,
        silent: `http://127.0.0.1:${states.ports.silent}/jwks`,
        refused: `http://0.0.0.0:${P}/jwks`,
      };
      const shops = await Promise.all(
        Object.entries(jwks).map(async ([name, url]) => {
          const m = await publishedMerchant(dev, { merchant: name === 'refused' ? {} : { trusted_svc_jwks_url: url }, policy: { requireMandateOverUsd: 5, holdForReviewBelowTier: null } });
          // A row written before the rule (or in another environment): the gate checks it again.
          if (name === 'refused') await sql(dev, 'update merchants set trusted_svc_jwks_url = ? where id = ?', [url, m.merchant.id]);
          const agent = agentId();
          const token = await issuer.sign({
            iss: 'https://wallet.example',
            sub: `mnd_${ulid().toLowerCase()}`,
            exp: Math.floor(Date.now() / 1000) + 600,
            decision: 'approve',
            agent_id: agent,
            authorization: { merchant: m.merchant.id, max_amount: '20.00', currency: 'USD', intent: null },
          });
          const session = await openSession(dev, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent, mandate: { type: 'svc', token } });
          return { name, m, session };
        }),
      );
      const before = connections;
      const order: string[] = [];
      const half = setTimeout(() => order.push('half-budget'), 1_000);
      const answers = await Promise.all(
        shops.map(async ({ name, m, session }) => {
          const { res } = await payX402(dev, m.base, session, newBuyer());
          order.push(name);
          return res;
        }),
      );
      clearTimeout(half);
      expect(order[0]).toBe('half-budget');
      for (const res of answers) {
        expect(res.status, res.text).toBe(403);
        expect(res.body.reason_codes).toEqual(['MANDATE_ISSUER_UNAVAILABLE']);
        expect(res.body.error_human).toBe(ISSUER_UNAVAILABLE_HUMAN);
      }
      expect(connections - before).toBe(0);
    } finally {
      await states.stop();
    }
  }, 120_000);

  it('GIVEN production WHEN a test merchant holds a loopback issuer JWKS URL THEN MANDATE_ISSUER_UNAVAILABLE and the listener is never reached', async () => {
    const before = connections;
    for (const url of [`http://127.0.0.1:${P}/jwks`, `https://localhost:${P}/jwks`, `https://[::ffff:127.0.0.1]:${P}/jwks`]) {
      const m = await publishedMerchant(prod, { policy: { requireMandateOverUsd: 5, holdForReviewBelowTier: null } });
      await sql(prod, 'update merchants set trusted_svc_jwks_url = ? where id = ?', [url, m.merchant.id]);
      const agent = agentId();
      const token = await issuer.sign({
        iss: 'https://wallet.example',
        sub: `mnd_${ulid().toLowerCase()}`,
        exp: Math.floor(Date.now() / 1000) + 600,
        decision: 'approve',
        agent_id: agent,
        authorization: { merchant: m.merchant.id, max_amount: '20.00', currency: 'USD', intent: null },
      });
      const session = await openSession(prod, m.base, [{ sku: 'coffee', qty: 2 }], { agent_id: agent, mandate: { type: 'svc', token } });
      const { res } = await payX402(prod, m.base, session, newBuyer());
      expect(res.status, `${url}: ${res.text}`).toBe(403);
      expect(res.body.reason_codes).toEqual(['MANDATE_ISSUER_UNAVAILABLE']);
    }
    expect(connections - before).toBe(0);
  }, 120_000);
});

describe('SVC_ALLOW_PRIVATE_URLS', () => {
  it('GIVEN NODE_ENV=production WHEN SVC_ALLOW_PRIVATE_URLS=true THEN the configuration is refused naming it; false is accepted', () => {
    const base = { NODE_ENV: 'production', SVC_MASTER_KEY: 'a'.repeat(64), SVC_PUBLIC_BASE_URL: 'https://checkout.example.com' };
    expect(() => loadConfig({ ...base, SVC_ALLOW_PRIVATE_URLS: 'true' })).toThrow(
      /^invalid configuration: SVC_ALLOW_PRIVATE_URLS must not be true with NODE_ENV=production/,
    );
    expect(loadConfig({ ...base, SVC_ALLOW_PRIVATE_URLS: 'false' }).SVC_ALLOW_PRIVATE_URLS).toBe(false);
    expect(loadConfig({ SVC_ALLOW_PRIVATE_URLS: 'true' }).SVC_ALLOW_PRIVATE_URLS).toBe(true);
  });

  it('GIVEN NODE_ENV=production and SVC_ALLOW_PRIVATE_URLS=true WHEN the server starts THEN it exits 1 with one line naming the setting', async () => {
    const run = await runScript(MAIN, [], {
      NODE_ENV: 'production',
      SVC_ALLOW_PRIVATE_URLS: 'true',
      SVC_MASTER_KEY: 'b'.repeat(64),
      SVC_PUBLIC_BASE_URL: 'https://checkout.example.com',
      PORT: '0',
      DATABASE_URL: undefined,
    });
    expect(run.code).toBe(1);
    const lines = run.stderr.trim().split('\n');
    expect(lines, run.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^invalid configuration: SVC_ALLOW_PRIVATE_URLS must not be true with NODE_ENV=production/);
  }, 120_000);
});
