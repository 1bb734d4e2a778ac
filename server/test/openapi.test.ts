import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';
import { contractRoutes, OPENAPI_JSON_PATH, renderOpenApi, SCHEMA_DTS_PATH, takesIdempotencyKey, webhookRetryText } from '../../scripts/emit-openapi.js';
import { REASON_CODES, WEBHOOK_RETRY_SCHEDULE_MS, WebhookEventType } from '@svc/contract';
import { RETRY_SCHEDULE_MS } from '../src/modules/webhooks/queue.js';

const require = createRequire(import.meta.url);
const STALE = 'is stale: run `npm run openapi` and commit the result';

type Operation = {
  operationId?: string;
  tags?: string[];
  description?: string;
  security?: Array<Record<string, string[]>>;
  'x-scopes'?: string[];
  parameters?: Array<{ name: string; in: string }>;
  responses: Record<string, unknown>;
};

describe('generated OpenAPI artifacts', () => {
  // GIVEN the contract as it is now
  const fresh = renderOpenApi();

  it('openapi/openapi.json matches a fresh emission byte for byte', () => {
    // WHEN the committed document is read THEN it is exactly what the emitter produces
    const committed = readFileSync(OPENAPI_JSON_PATH, 'utf8');
    expect(committed === fresh, `openapi/openapi.json ${STALE}`).toBe(true);
  });

  it('openapi/schema.d.ts matches openapi-typescript run on the fresh document', async () => {
    // The CLI writes COMMENT_HEADER + astToString(openapiTS(...)); same here, in memory.
    const types = COMMENT_HEADER + astToString(await openapiTS(fresh, { silent: true }));
    const committed = readFileSync(SCHEMA_DTS_PATH, 'utf8');
    expect(committed === types, `openapi/schema.d.ts ${STALE}`).toBe(true);
  });

  it('emission is deterministic and ends with one newline', () => {
    expect(renderOpenApi()).toBe(fresh);
    expect(fresh.endsWith('}\n')).toBe(true);
  });

  it('documents every contract route with its operationId, tag and auth', () => {
    const doc = JSON.parse(fresh) as {
      openapi: string;
      paths: Record<string, Record<string, Operation>>;
      components: { securitySchemes: Record<string, { type: string; scheme?: string; in?: string; name?: string }> };
    };
    expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.components.securitySchemes.sessionCookie).toMatchObject({ type: 'apiKey', in: 'cookie', name: 'svc_session' });

    const routes = contractRoutes();
    expect(routes.length).toBeGreaterThan(0);
    const documented = Object.values(doc.paths).flatMap((item) => Object.values(item).map((op) => op.operationId));
    expect(documented.sort()).toEqual(routes.map((r) => r.meta.operationId).sort());

    for (const r of routes) {
      const op = doc.paths[r.openApiPath]?.[r.method];
      expect(op, `${r.name}: ${r.method.toUpperCase()} ${r.openApiPath} missing`).toBeDefined();
      expect(op!.operationId, r.name).toBe(r.meta.operationId);
      expect(op!.tags, r.name).toEqual([r.meta.tag]);
      const headers = (op!.parameters ?? []).filter((p) => p.in === 'header').map((p) => p.name);
      if (r.meta.auth === 'key') {
        // An API key, or a signed-in member's session cookie (the dashboard).
        expect(op!.security, r.name).toEqual([{ bearerAuth: [] }, { sessionCookie: [] }]);
        expect(op!['x-scopes'], r.name).toEqual([...r.meta.scopes]);
        for (const s of r.meta.scopes) expect(op!.description, r.name).toContain(`\`${s}\``);
      } else if (r.meta.auth === 'session') {
        expect(op!.security, r.name).toEqual([{ sessionCookie: [] }]);
      } else if (r.meta.auth === 'operator') {
        expect(op!.security, r.name).toEqual([{ operatorToken: [] }]);
      } else {
        expect(op!.security, r.name).toEqual([]);
        expect(op!['x-scopes'], r.name).toBeUndefined();
      }
      if (takesIdempotencyKey(r)) {
        expect(headers, r.name).toContain('Idempotency-Key');
        expect(op!.responses['409'], r.name).toBeDefined();
      } else {
        expect(headers, r.name).not.toContain('Idempotency-Key');
      }
    }
  });

  it('marks the management routes as key-auth with their scopes', () => {
    // A spot check that the walk reads real metadata rather than defaults.
    const byId = new Map(contractRoutes().map((r) => [r.meta.operationId, r]));
    expect(byId.get('createMerchant')?.meta).toMatchObject({ auth: 'key', scopes: ['merchants:write'] });
    expect(byId.get('healthz')?.meta.auth).toBe('public');
    expect(byId.get('getMerchantJwks')?.meta.auth).toBe('public');
  });
});

describe('OpenAPI lint', () => {
  it('GIVEN the committed document WHEN linted with Redocly recommended rules THEN there are no errors and main operations carry examples', () => {
    const out = spawnSync(process.execPath, [require.resolve('@redocly/cli/bin/cli.js'), 'lint', OPENAPI_JSON_PATH, '--format=json'], { encoding: 'utf8' });
    const report = JSON.parse(out.stdout) as { totals: { errors: number; warnings: number } };
    expect(report.totals.errors, out.stdout.slice(0, 2000)).toBe(0);
    expect(report.totals.warnings, out.stdout.slice(0, 2000)).toBe(0);
    const doc = JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8'));
    for (const [path, method, status] of [
      ['/v1/merchants', 'post', '201'],
      ['/m/{merchant}/agent/checkout', 'post', '201'],
      ['/m/{merchant}/agent/checkout/{id}/settle', 'post', '200'],
    ] as const) {
      expect(doc.paths[path][method].responses[status].content['application/json'].example, `${method} ${path}`).toBeDefined();
    }
  });
});

describe('OpenAPI for integrators', () => {
  const doc = () => JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8'));

  it('GIVEN the document THEN resources are named components referenced with $ref, and the error body is one schema whose codes are the registry', () => {
    const d = doc();
    const schemas = d.components.schemas as Record<string, any>;
    for (const name of ['Merchant', 'CatalogItem', 'PolicyVersion', 'Order', 'CheckoutSession', 'PaymentRequired', 'WebhookEndpoint', 'WebhookEvent', 'Error', 'ApiKey']) {
      expect(schemas[name], name).toBeDefined();
    }
    const json = (op: any, status: string) => op.responses[status].content['application/json'].schema;
    expect(json(d.paths['/v1/merchants'].post, '201')).toEqual({ $ref: '#/components/schemas/Merchant' });
    expect(json(d.paths['/v1/merchants'].get, '200').properties.data.items).toEqual({ $ref: '#/components/schemas/Merchant' });
    expect(json(d.paths['/v1/merchants'].post, '400')).toEqual({ $ref: '#/components/schemas/Error' });
    expect(json(d.paths['/m/{merchant}/agent/checkout/{id}'].get, '200')).toEqual({ $ref: '#/components/schemas/CheckoutSession' });
    expect(schemas.Error.properties.reason_codes.items.enum).toEqual(Object.keys(REASON_CODES).sort());
    // Every error response of every operation is a named schema: the one Error body, or a
    // body that carries more (settle's 402/403 outcomes, the x402 402 challenge, publish's findings).
    const refsOf = (schema: any): string[] => (schema.oneOf ? schema.oneOf.flatMap(refsOf) : [schema.$ref]);
    let plain = 0;
    for (const item of Object.values(d.paths) as any[]) {
      for (const op of Object.values(item) as any[]) {
        for (const [status, res] of Object.entries(op.responses) as [string, any][]) {
          const schema = res.content?.['application/json']?.schema;
          if (Number(status) < 400 || !schema) continue;
          for (const ref of refsOf(schema)) expect(ref, `${op.operationId} ${status}`).toMatch(/^#\/components\/schemas\/(Error|SettlePaymentInvalid|SettleRejected|PublishRefused|X402Challenge)$/);
          if (schema.$ref === '#/components/schemas/Error') plain++;
        }
      }
    }
    expect(plain).toBeGreaterThan(300);
  });

  it('GIVEN the document THEN every webhook event type is described with its signature headers', () => {
    const hooks = doc()['x-webhooks'];
    expect(Object.keys(hooks).sort()).toEqual([...WebhookEventType.options].sort());
    for (const hook of Object.values(hooks) as any[]) {
      expect(hook.post.requestBody.content['application/json'].schema).toEqual({ $ref: '#/components/schemas/WebhookEvent' });
      expect(hook.post.parameters.map((p: any) => p.name)).toEqual(['Svc-Signature', 'Svc-Event-Id', 'Svc-Delivery-Id']);
    }
  });

  it('GIVEN the schedule the delivery worker runs WHEN a webhook is described (document and docs) THEN the attempts and their times are that schedule', () => {
    // one schedule: the worker's is the contract's
    expect(RETRY_SCHEDULE_MS).toBe(WEBHOOK_RETRY_SCHEDULE_MS);
    const text = webhookRetryText();
    expect(text).toContain('7 attempts in all, the first at once and the others 30 s, 2 min, 10 min, 1 h, 6 h and 24 h after the delivery was enqueued');
    for (const hook of Object.values(doc()['x-webhooks']) as any[]) {
      expect(hook.post.description).toContain(text);
      expect(hook.post.description).not.toMatch(/days/);
    }
    // docs/webhooks.md's table says the same
    const docs = readFileSync(new URL('../../docs/webhooks.md', import.meta.url), 'utf8');
    const table = docs.slice(docs.indexOf('| Attempt | Delay from enqueue |')).split('\n\n')[0]!.split('\n').slice(2);
    const unit: Record<string, number> = { s: 1000, min: 60_000, h: 3_600_000 };
    const delays = table.map((row) => {
      const cell = row.split('|')[2]!.trim();
      if (cell === 'immediate') return 0;
      const [, n, u] = /^\+(\d+) (s|min|h)$/.exec(cell)!;
      return Number(n) * unit[u!]!;
    });
    expect(delays).toEqual([...WEBHOOK_RETRY_SCHEDULE_MS]);
  });
});
