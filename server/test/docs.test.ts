import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import express from 'express';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_OPENAPI_PATH, docsRouter } from '../src/http/docs.js';
import { expectErrorShape, TestApp } from './helpers/harness.js';

let app: TestApp;
beforeAll(async () => {
  app = await TestApp.start();
});
afterAll(async () => app?.stop());

describe('GET /openapi.json', () => {
  it('GIVEN the emitted document WHEN fetched without a key THEN it is served byte for byte with open CORS', async () => {
    const res = await app.request('GET', '/openapi.json');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.text).toBe(readFileSync(DEFAULT_OPENAPI_PATH, 'utf8'));
    expect(res.body.openapi).toMatch(/^3\./);
    expect(Object.keys(res.body.paths)).toContain('/v1/merchants');
  });

  it('GIVEN a bad Authorization header WHEN fetching the docs routes THEN auth does not get in the way', async () => {
    const spec = await app.request('GET', '/openapi.json', { key: 'svc_test_bogus' });
    expect(spec.status).toBe(200);
    const docs = await app.request('GET', '/docs', { key: 'svc_test_bogus' });
    expect(docs.status).toBe(200);
    const preflight = await app.request('OPTIONS', '/openapi.json', { headers: { origin: 'https://elsewhere.example', 'access-control-request-method': 'GET' } });
    expect(preflight.status).toBe(204);
  });

  it('GIVEN no emitted document WHEN fetched THEN 404 with the error shape', async () => {
    const bare = express().use(docsRouter({ openapiPath: '/nonexistent/openapi.json' }));
    const server = bare.listen(0, '127.0.0.1');
    await new Promise<void>((r) => server.once('listening', () => r()));
    try {
      const res = await fetch(`http://127.0.0.1:${(server.address() as AddressInfo).port}/openapi.json`);
      expect(res.status).toBe(404);
      const body: unknown = await res.json();
      expectErrorShape(body);
      expect(body.reason_codes).toEqual(['NOT_FOUND']);
    } finally {
      server.close();
    }
  });
});

describe('GET /docs', () => {
  it('GIVEN the docs page WHEN loaded THEN it references only same-origin assets and a CSP that forbids other origins', async () => {
    const res = await app.request('GET', '/docs');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    const srcs = [...res.text.matchAll(/<script src="([^"]+)"/g)].map((m) => m[1]);
    expect(srcs).toEqual(['/docs/assets/redoc.standalone.js', '/docs/assets/init.js']);
    expect(res.text).not.toMatch(/https?:\/\//);
    const csp = res.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("script-src 'self'");
    expect(csp).toContain("img-src 'self' data:");
    expect(csp).not.toMatch(/https?:/);
  });

  it('GIVEN the page assets WHEN fetched THEN the Redoc bundle comes from node_modules and init loads /openapi.json', async () => {
    const bundle = await fetch(`${app.baseUrl}/docs/assets/redoc.standalone.js`);
    expect(bundle.status).toBe(200);
    expect(bundle.headers.get('content-type')).toMatch(/^text\/javascript/);
    const expected = readFileSync(createRequire(import.meta.url).resolve('redoc/bundles/redoc.standalone.js'));
    expect(Buffer.from(await bundle.arrayBuffer()).equals(expected)).toBe(true);

    const init = await app.request('GET', '/docs/assets/init.js');
    expect(init.status).toBe(200);
    expect(init.text).toContain("Redoc.init('/openapi.json'");
  });
});
