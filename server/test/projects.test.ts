import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { POLICY_PRESETS } from '@svc/contract';
import { parseCommand } from '../src/modules/operator/index.js';
import { agentId, newBuyer, publishedMerchant } from './helpers/agent.js';
import { openSession, payX402 } from './helpers/agent-protocol.js';
import { expectError, sql } from './helpers/foundation.js';
import { merchantBody, TestApp } from './helpers/harness.js';

/**
 * Issue 29, "Keys, projects and the dashboard" and "Defaults that bite": the installation's
 * default project (where `keys create` puts keys) belongs to the first account to sign in, a
 * member selects only projects of their own organizations, and validate warns (publishable) of
 * a policy that turns away every new agent. Two installations: the CLI first, then sign-in
 * first.
 */
let cliFirst: TestApp;
let signInFirst: TestApp;

beforeAll(async () => {
  cliFirst = await TestApp.start();
  signInFirst = await TestApp.start();
});
afterAll(async () => {
  await cliFirst?.stop();
  await signInFirst?.stop();
});

/** `npm run svc -- keys create --mode test --json`, run in-process on the app's database. */
async function keysCreate(app: TestApp): Promise<{ id: string; secret: string; project_id: string }> {
  const parsed = parseCommand(['keys', 'create', '--mode', 'test', '--json']);
  if (parsed.help) throw new Error('unexpected help');
  return JSON.parse(await parsed.command.run(parsed.values, parsed.positionals, app.services));
}

/** The magic link, as the development server hands it out, confirmed by the link page's button: the session cookie. */
async function signIn(app: TestApp, email: string): Promise<string> {
  const started = await app.request('POST', '/v1/auth/email/start', { body: { email } });
  expect(started.status, started.text).toBe(200);
  const verified = await app.request('POST', '/v1/auth/verify', {
    rawBody: new URLSearchParams({ token: started.body.dev_token }).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded', 'sec-fetch-site': 'same-origin' },
  });
  expect(verified.status, verified.text).toBe(303);
  return /svc_session=([^;]+)/.exec(verified.headers.get('set-cookie') ?? '')![1]!;
}

/** A request as the signed-in member, in the project Svc-Project names (their first without it). */
const asMember = (app: TestApp, cookie: string, method: string, path: string, project?: string, body?: unknown) =>
  app.request(method, path, { headers: { cookie: `svc_session=${cookie}`, origin: app.baseUrl, ...(project ? { 'svc-project': project } : {}) }, ...(body === undefined ? {} : { body }) });

describe('the default project belongs to the first account', () => {
  let cliKey: { id: string; secret: string; project_id: string };
  let merchantId: string;
  let owner: string;
  let stranger: string;
  let strangerProject: string;

  it('GIVEN a fresh installation WHEN `keys create` mints a key and a merchant is created with it THEN the key is of the unowned Default project', async () => {
    cliKey = await keysCreate(cliFirst);
    const me = await cliFirst.request('GET', '/v1/me', { key: cliKey.secret });
    expect(me.body.project).toMatchObject({ id: cliKey.project_id, name: 'Default project' });
    expect(me.body.projects).toEqual([{ id: cliKey.project_id, name: 'Default project', organization_id: me.body.project.organization_id, is_default: true }]);
    const m = await cliFirst.request('POST', '/v1/merchants', { key: cliKey.secret, body: merchantBody({ name: 'CLI Shop' }) });
    expect(m.status, m.text).toBe(201);
    merchantId = m.body.id;
  });

  it('WHEN the first person signs in THEN their dashboard is the Default project and shows the merchant the CLI made', async () => {
    owner = await signIn(cliFirst, 'first@example.com');
    const me = await asMember(cliFirst, owner, 'GET', '/v1/me');
    expect(me.status, me.text).toBe(200);
    expect(me.body.project.id).toBe(cliKey.project_id);
    expect(me.body.projects.map((p: { id: string; is_default: boolean }) => [p.id, p.is_default])).toEqual([[cliKey.project_id, true]]);
    const merchants = await asMember(cliFirst, owner, 'GET', '/v1/merchants');
    expect(merchants.body.data.map((m: { id: string }) => m.id)).toEqual([merchantId]);
  });

  it('WHEN a second person signs in THEN they get a project of their own and never see, list or select the Default project', async () => {
    stranger = await signIn(cliFirst, 'second@example.com');
    const me = await asMember(cliFirst, stranger, 'GET', '/v1/me');
    strangerProject = me.body.project.id;
    expect(me.body.project.name).toBe('My project');
    expect(me.body.projects.map((p: { id: string }) => p.id)).toEqual([strangerProject]);
    expect((await asMember(cliFirst, stranger, 'GET', '/v1/merchants')).body.data).toEqual([]);
    // selecting someone else's project: 404, the same as a project that does not exist
    expectError(await asMember(cliFirst, stranger, 'GET', '/v1/me', cliKey.project_id), 404, 'NOT_FOUND');
    expectError(await asMember(cliFirst, stranger, 'GET', '/v1/merchants', cliKey.project_id), 404, 'NOT_FOUND');
    expectError(await asMember(cliFirst, stranger, 'GET', `/v1/merchants/${merchantId}`, cliKey.project_id), 404, 'NOT_FOUND');
    expectError(await asMember(cliFirst, stranger, 'GET', '/v1/me', 'proj_00000000000000000000000000'), 404, 'NOT_FOUND');
    // nor through its own project: the merchant is not there
    expect((await asMember(cliFirst, stranger, 'GET', `/v1/merchants/${merchantId}`)).status).toBe(404);
    // and the owner cannot step into the stranger's project either
    expectError(await asMember(cliFirst, owner, 'GET', '/v1/me', strangerProject), 404, 'NOT_FOUND');
  });

  it('WHEN `keys create` runs again after sign-in THEN the key is of the first account\'s project, and only one project is the default', async () => {
    const again = await keysCreate(cliFirst);
    expect(again.project_id).toBe(cliKey.project_id);
    const defaults = await sql(cliFirst, 'select id from projects where is_default');
    expect(defaults).toEqual([{ id: cliKey.project_id }]);
  });

  it('WHEN `svc login` is approved by each member THEN each command line\'s key is of that member\'s project; a foreign Svc-Project approves nothing', async () => {
    const loginFor = async (cookie: string, project?: string) => {
      const dc = await cliFirst.request('POST', '/v1/auth/cli/start', { body: {} });
      const approved = await asMember(cliFirst, cookie, 'POST', '/v1/auth/cli/approve', project, { user_code: dc.body.user_code });
      return { dc, approved };
    };
    const mine = await loginFor(owner);
    expect(mine.approved.status, mine.approved.text).toBe(200);
    const theirs = await loginFor(stranger);
    expect(theirs.approved.status, theirs.approved.text).toBe(200);
    const foreign = await loginFor(stranger, cliKey.project_id);
    expectError(foreign.approved, 404, 'NOT_FOUND');
    const keyOf = async (deviceCode: string) => (await cliFirst.request('POST', '/v1/auth/cli/poll', { body: { device_code: deviceCode } })).body.api_key;
    const [ownerKey, strangerKey] = [await keyOf(mine.dc.body.device_code), await keyOf(theirs.dc.body.device_code)];
    expect((await cliFirst.request('GET', '/v1/me', { key: ownerKey.secret })).body.project.id).toBe(cliKey.project_id);
    expect((await cliFirst.request('GET', '/v1/me', { key: strangerKey.secret })).body.project.id).toBe(strangerProject);
  });
});

describe('sign-in before the CLI', () => {
  it('GIVEN two people signing in at once on a fresh installation THEN exactly one owns the Default project, and `keys create` then puts its key there', async () => {
    const [a, b] = await Promise.all([signIn(signInFirst, 'a@example.com'), signIn(signInFirst, 'b@example.com')]);
    const projects = await Promise.all([a, b].map(async (c) => (await asMember(signInFirst, c, 'GET', '/v1/me')).body.projects as Array<{ id: string; name: string; is_default: boolean }>));
    const owners = projects.filter((list) => list.some((p) => p.is_default));
    expect(owners).toHaveLength(1);
    const dflt = owners[0]!.find((p) => p.is_default)!;
    expect(dflt.name).toBe('Default project');
    expect(await sql(signInFirst, 'select count(*)::int as n from memberships m join projects p on p.organization_id = m.organization_id where p.is_default')).toEqual([{ n: 1 }]);
    const key = await keysCreate(signInFirst);
    expect(key.project_id).toBe(dflt.id);
  });
});

describe('validate warns of a policy that turns away every new agent', () => {
  const validate = async (policy: Record<string, unknown>) => {
    const key = await cliFirst.key('test');
    const m = await cliFirst.request('POST', '/v1/merchants', { key, body: merchantBody() });
    const q = `?merchant_id=${m.body.id}`;
    expect((await cliFirst.request('PUT', `/v1/policy${q}`, { key, body: { body: policy } })).status).toBe(201);
    return { key, q, res: await cliFirst.request('POST', `/v1/validate${q}`, { key }) };
  };

  it('GIVEN the old STRICT preset (mandate over 0, minimum tier trusted, hold below standard) WHEN validated THEN ok with three warnings, and it publishes', async () => {
    const { key, q, res } = await validate({ requireMandateOverUsd: 0, minReputationTier: 'trusted', holdForReviewBelowTier: 'standard' });
    expect(res.status, res.text).toBe(200);
    expect(res.body.ok).toBe(true);
    expect(res.body.findings.map((f: { code: string; severity: string }) => [f.code, f.severity])).toEqual([
      ['POLICY_REJECTS_NEW_AGENTS', 'warning'],
      ['POLICY_REJECTS_NEW_AGENTS', 'warning'],
      ['POLICY_HOLDS_NEW_AGENTS', 'warning'],
    ]);
    expect(res.body.findings[0].human).toContain('requireMandateOverUsd');
    expect((await cliFirst.request('POST', `/v1/publish${q}`, { key })).status).toBe(200);
  });

  it('GIVEN a policy with an unknown field WHEN validated THEN not ok with the error only (warnings need a policy that parses); without it, ok with the warning', async () => {
    const { res } = await validate({ minReputationTier: 'elite', maxPerTransactionUSD: 5 });
    expect(res.body.ok).toBe(false);
    expect(res.body.findings).toEqual([{ code: 'POLICY_FIELD_UNKNOWN', human: 'policy.maxPerTransactionUSD: is not a MerchantPolicy field.', severity: 'error' }]);
    const { res: warnOnly } = await validate({ minReputationTier: 'elite' });
    expect(warnOnly.body).toMatchObject({ ok: true, findings: [{ code: 'POLICY_REJECTS_NEW_AGENTS', severity: 'warning' }] });
  });

  it('GIVEN every preset WHEN validated THEN none warns, and a new agent buys under the first preset (STRICT)', async () => {
    for (const preset of Object.values(POLICY_PRESETS)) {
      const { res } = await validate(preset);
      expect(res.body, JSON.stringify(preset)).toEqual({ ok: true, findings: [] });
    }
    const first = Object.values(POLICY_PRESETS)[0]!;
    const { base } = await publishedMerchant(cliFirst, { policy: first, products: [{ sku: 'espresso', amount: '2.80' }] });
    const s = await openSession(cliFirst, base, [{ sku: 'espresso', qty: 1 }], { agent_id: agentId() });
    const { res } = await payX402(cliFirst, base, s, newBuyer());
    expect(res.status, res.text).toBe(200);
  });
});
