import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import openapiTS, { astToString, COMMENT_HEADER } from 'openapi-typescript';
import { describe, expect, it } from 'vitest';
import { contractRoutes, OPENAPI_JSON_PATH, renderOpenApi, SCHEMA_DTS_PATH, takesIdempotencyKey } from '../../scripts/emit-openapi.js';

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
      components: { securitySchemes: Record<string, { type: string; scheme: string }> };
    };
    expect(doc.openapi).toMatch(/^3\.0\.\d+$/);
    expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });

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
        expect(op!.security, r.name).toEqual([{ bearerAuth: [] }]);
        expect(op!['x-scopes'], r.name).toEqual([...r.meta.scopes]);
        for (const s of r.meta.scopes) expect(op!.description, r.name).toContain(`\`${s}\``);
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
    const doc = JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8'));
    for (const [path, method, status] of [
      ['/v1/merchants', 'post', '201'],
      ['/m/{merchant}/agent/checkout', 'post', '201'],
      ['/m/{merchant}/agent/checkout/{id}/settle', 'post', '200'],
    ] as const) {
      expect(doc.paths[path][method].responses[status].content['application/json'].example, `${method} ${path}`).toBeDefined();
    }
  }, 60_000);
});
