import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OPENAPI_JSON_PATH } from '../../scripts/emit-openapi.js';
import { agentId, publishedMerchant } from './helpers/agent.js';
import { TestApp } from './helpers/harness.js';
import { checkResponseAgainstOpenApi, OpenApiDriftError } from './helpers/openapi-responses.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => {
  await app?.stop();
});

/** Every schema node of the document (examples excluded), with its JSON pointer. */
function* schemaNodes(node: unknown, at = ''): Generator<[string, Record<string, unknown>]> {
  if (Array.isArray(node)) {
    for (const [i, v] of node.entries()) yield* schemaNodes(v, `${at}/${i}`);
    return;
  }
  if (!node || typeof node !== 'object') return;
  yield [at, node as Record<string, unknown>];
  for (const [k, v] of Object.entries(node)) if (k !== 'example') yield* schemaNodes(v, `${at}/${k}`);
}

describe('every answer has its content in the document', () => {
  it('GIVEN the committed document WHEN any response other than 204, 303 and 304 THEN it declares a media type and schema', () => {
    const doc = JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8'));
    type Res = { $ref?: string; content?: Record<string, { schema?: unknown }> };
    const bare: string[] = [];
    for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, Res> }>>)) {
      for (const [method, op] of Object.entries(item)) {
        // Node's transport answers (transport-errors.ts) can come to any operation: each declares them
        for (const status of ['400', '408', '417', '431']) expect(op.responses[status], `${method} ${path} ${status}`).toBeDefined();
        for (const [status, shared] of Object.entries(op.responses)) {
          if (['204', '303', '304'].includes(status)) continue;
          const res: Res = shared.$ref ? doc.components.responses[shared.$ref.replace('#/components/responses/', '')] : shared;
          const media = Object.values(res.content ?? {});
          if (media.length === 0 || media.some((m) => m.schema === undefined)) bare.push(`${method.toUpperCase()} ${path} ${status}`);
        }
      }
    }
    expect(bare).toEqual([]);
    const verify = doc.paths['/v1/auth/verify'];
    for (const [op, status] of [[verify.get, '200'], [verify.get, '410'], [verify.post, '403'], [verify.post, '410']]) {
      expect(op.responses[status].content).toEqual({ 'text/html': { schema: { type: 'string' } } });
    }
  });

  it('GIVEN the sign-in link WHEN its pages are fetched THEN the HTML answers, and the errors before any page, are the ones the document declares', async () => {
    // (every app.request is checked against the document: helpers/openapi-responses.ts)
    const page = await app.request('GET', '/v1/auth/verify?token=unknown');
    expect(page.status).toBe(410);
    expect(page.headers.get('content-type')).toBe('text/html; charset=utf-8');
    const foreign = await app.request('POST', '/v1/auth/verify', { rawBody: 'token=unknown', headers: { 'content-type': 'application/x-www-form-urlencoded', origin: 'https://elsewhere.example' } });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('content-type')).toBe('text/html; charset=utf-8');
    // before any page: a token no link has, a form over 4 KB (the error body, declared too)
    const long = await app.request('GET', `/v1/auth/verify?token=${'a'.repeat(201)}`);
    expect(long.status, long.text).toBe(400);
    expect(long.body.reason_codes).toEqual(['VALIDATION_FAILED']);
    const big = await app.request('POST', '/v1/auth/verify', { rawBody: `token=${'a'.repeat(5000)}`, headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(big.status, big.text).toBe(413);
    expect(big.body.reason_codes).toEqual(['PAYLOAD_TOO_LARGE']);
  });
});

describe('OpenAPI nullable enums', () => {
  it('GIVEN the committed document WHEN any schema is a nullable enum THEN null is one of its values', () => {
    const doc = JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8'));
    const broken = [...schemaNodes(doc)].filter(([, n]) => n.nullable === true && Array.isArray(n.enum) && !n.enum.includes(null)).map(([p]) => p);
    expect(broken).toEqual([]);
    const ref = doc.paths['/v1/webhooks/endpoints/{id}'].get.responses['200'].content['application/json'].schema.$ref as string;
    const endpoint = doc.components.schemas[ref.replace('#/components/schemas/', '')];
    expect(endpoint.properties.disabled_reason.enum).toContain(null);
  });

  it('GIVEN a new webhook endpoint and a mock-rail session WHEN read through the API THEN their null enums (disabled_reason, payment_required.asset/chain) validate against the document', async () => {
    const key = await app.key('test');
    const ep = await app.request('POST', '/v1/webhooks/endpoints', { key, body: { url: 'https://hooks.example.com/h', enabled_events: ['*'] } });
    expect(ep.body.disabled_reason).toBeNull();
    expect((await app.request('GET', `/v1/webhooks/endpoints/${ep.body.id}`, { key })).status).toBe(200);
    const shop = await publishedMerchant(app);
    const s = await app.request('POST', `${shop.base}/agent/checkout`, { body: { agent_id: agentId(), items: [{ sku: 'coffee', qty: 1 }], rail: 'mock' } });
    expect(s.status, s.text).toBe(201);
    expect(s.body.payment_required).toMatchObject({ asset: null, chain: null });
  });
});

describe('responses are checked against the document', () => {
  const json = 'application/json; charset=utf-8';
  it('GIVEN a body that breaks its declared schema WHEN checked THEN it throws naming the operation and the field', () => {
    const bad = JSON.stringify({ reason_codes: 'NOT_FOUND', error_human: 1 });
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x?x=1', 404, json, bad)).toThrow(OpenApiDriftError);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, json, bad)).toThrow(/getMerchant|merchants/i);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 418, json, '{}')).toThrow(/not declared/);
  });

  it('GIVEN a request the document does not describe WHEN checked THEN an error is the Error body with its registered status, and answers outside the API pass', () => {
    const notFound = JSON.stringify({ reason_codes: ['NOT_FOUND'], error_human: 'No such resource or route.' });
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/nope', 404, json, notFound)).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('PUT', '/v1/merchants/mrch_x', 404, json, notFound)).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/nope', 404, json, '{"x":1}')).toThrow(OpenApiDriftError);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/nope', 400, json, notFound)).toThrow(/NOT_FOUND is registered with status 404/);
    // a CONNECT's target is host:port, and Node's own answers come before any route
    const connect = JSON.stringify({ reason_codes: ['METHOD_NOT_ALLOWED'], error_human: 'no' });
    expect(() => checkResponseAgainstOpenApi('CONNECT', 'example.com:443', 405, json, connect)).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('CONNECT', 'example.com:443', 400, json, connect)).toThrow(/registered with status 405/);
    expect(() => checkResponseAgainstOpenApi('GARBAGE', '', 400, json, '')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('GET', '/docs', 200, 'text/html', '<html>')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('GET', '/metrics', 200, 'text/plain; version=0.0.4', 'x 1')).not.toThrow();
  });

  it('GIVEN a documented operation WHEN the body is of a media type it does not declare, or empty where it declares one, THEN it throws', () => {
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, 'text/plain', 'x')).toThrow(/a text\/plain body where the document declares application\/json/);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, json, '')).toThrow(/an empty body/);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/auth/verify?token=x', 200, json, '{}')).toThrow(/declares text\/html/);
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/auth/verify?token=x', 200, 'text/html; charset=utf-8', '<!doctype html>')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('POST', '/v1/auth/verify', 303, null, '')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('POST', '/v1/auth/verify', 303, 'text/plain', 'See Other')).toThrow(/declares none/);
    // the agent routes at the root of a merchant's host are its /m/{merchant} operations
    expect(() => checkResponseAgainstOpenApi('GET', '/agent/catalog', 200, json, '{"x":1}')).toThrow(/getAgentCatalog/);
  });

  it('GIVEN a matching body WHEN checked THEN it passes', () => {
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, json, JSON.stringify({ reason_codes: ['NOT_FOUND'], error_human: 'No such merchant.' }))).not.toThrow();
  });
});
