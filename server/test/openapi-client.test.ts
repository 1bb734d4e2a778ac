import createClient from 'openapi-fetch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { paths } from '../../openapi/schema.js';
import { merchantBody, TestApp } from './helpers/harness.js';

/**
 * A client nobody here wrote: openapi-fetch over the types openapi-typescript generated from
 * the committed document, as an integrator in another stack would use the API.
 */
let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

describe('a client generated from openapi/openapi.json', () => {
  it('GIVEN the generated types WHEN an integrator creates and lists merchants and reads an error THEN the calls work and are typed', async () => {
    const key = await app.key('test');
    const client = createClient<paths>({ baseUrl: app.baseUrl, headers: { authorization: `Bearer ${key.secret}` } });

    const body = merchantBody();
    const created = await client.POST('/v1/merchants', { body: body as paths['/v1/merchants']['post']['requestBody']['content']['application/json'] });
    expect(created.response.status).toBe(201);
    const merchant = created.data!;
    expect(merchant.id).toMatch(/^mrch_/);
    expect(merchant.slug).toBe(body.slug);

    const list = await client.GET('/v1/merchants', { params: { query: { limit: 10 } } });
    expect(list.data!.data.map((m) => m.id)).toContain(merchant.id);

    const missing = await client.GET('/v1/merchants/{id}', { params: { path: { id: 'mrch_00000000000000000000000000' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error!.reason_codes).toEqual(['NOT_FOUND']);
  });
});
