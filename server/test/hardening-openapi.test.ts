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

  it('GIVEN an undocumented path, a method the path lacks or a non-JSON body WHEN checked THEN it is skipped', () => {
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/nope', 404, json, '{"x":1}')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('PUT', '/v1/merchants/mrch_x', 404, json, '{"x":1}')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('GET', '/docs', 200, 'text/html', '<html>')).not.toThrow();
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, 'text/plain', 'x')).not.toThrow();
  });

  it('GIVEN a matching body WHEN checked THEN it passes', () => {
    expect(() => checkResponseAgainstOpenApi('GET', '/v1/merchants/mrch_x', 404, json, JSON.stringify({ reason_codes: ['NOT_FOUND'], error_human: 'No such merchant.' }))).not.toThrow();
  });
});
