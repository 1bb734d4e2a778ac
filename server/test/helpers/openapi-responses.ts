import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { OPENAPI_JSON_PATH } from '../../../scripts/emit-openapi.js';

/**
 * Checks every JSON response the test suite receives against openapi/openapi.json, so the
 * committed document and the server cannot drift apart. Requests to paths or methods the
 * document does not describe, and responses that are not JSON, are skipped; a declared
 * operation answering a status it does not declare, or a body its schema rejects, throws.
 */
type Operation = { operationId: string; responses: Record<string, { content?: Record<string, { schema?: unknown }> }> };
type Doc = { paths: Record<string, Record<string, Operation>>; components?: Record<string, unknown> };
type Route = { re: RegExp; params: number; ops: Record<string, Operation> };

let routes: Route[] | null = null;
/** The document's components, carried beside each compiled schema so `#/components/...` refs resolve. */
let components: Record<string, unknown> = {};
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addFormat('uri', (v: string) => URL.canParse(v));
ajv.addFormat('uuid', /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i);
const compiled = new Map<string, ValidateFunction>();

function load(): Route[] {
  if (routes) return routes;
  const doc = JSON.parse(readFileSync(OPENAPI_JSON_PATH, 'utf8')) as Doc;
  components = doc.components ?? {};
  routes = Object.entries(doc.paths)
    .map(([template, ops]) => {
      const parts = template.split(/\{[^}]+\}/).map((s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
      return { re: new RegExp(`^${parts.join('[^/]+')}$`), params: parts.length - 1, ops };
    })
    // A literal segment wins over a parameter (/v1/reputation/agent/{id} before /v1/reputation/{id}).
    .sort((a, b) => a.params - b.params);
  return routes;
}

/** The operation a request maps to, or null when the document does not describe it. */
export function findOperation(method: string, path: string): Operation | null {
  const pathname = new URL(path, 'http://x').pathname;
  const m = method.toLowerCase();
  for (const r of load()) if (r.re.test(pathname) && r.ops[m]) return r.ops[m];
  return null;
}

export class OpenApiDriftError extends Error {}

/** Throws OpenApiDriftError when a JSON response breaks the document. */
export function checkResponseAgainstOpenApi(method: string, path: string, status: number, contentType: string | null, text: string): void {
  const op = findOperation(method, path);
  if (!op) return;
  const where = `${method.toUpperCase()} ${path} -> ${status} (${op.operationId})`;
  const declared = op.responses[String(status)] ?? op.responses.default;
  if (!declared) throw new OpenApiDriftError(`OpenAPI drift: ${where}: status ${status} is not declared`);
  if (!contentType || !/^application\/json\b/.test(contentType) || text.length === 0) return;
  const schema = declared.content?.['application/json']?.schema;
  if (!schema) throw new OpenApiDriftError(`OpenAPI drift: ${where}: a JSON body where the document declares none`);
  const key = `${op.operationId} ${status}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ ...(schema as object), components });
    compiled.set(key, validate);
  }
  const body: unknown = JSON.parse(text);
  if (!validate(body)) {
    const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
    throw new OpenApiDriftError(`OpenAPI drift: ${where}: ${errors.join('; ')}\nbody: ${text.slice(0, 2000)}`);
  }
}
