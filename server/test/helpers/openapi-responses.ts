import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import { REASON_CODES } from '@svc/contract';
import { OPENAPI_JSON_PATH } from '../../../scripts/emit-openapi.js';

/**
 * Checks every response the test suite receives against openapi/openapi.json, so the committed
 * document and the server cannot drift apart: of every status and content type.
 *
 * - A documented operation (the agent routes at the root of a merchant's own host are its
 *   `/m/{merchant}` operations, as agent-host.ts serves them) must declare the status; a body
 *   must be of a media type the document declares for it and match that schema (JSON parsed,
 *   any other type as a string); an empty body is right only where the document declares none.
 * - Anything else (an unknown path or method, a CONNECT, an answer Node's HTTP server gives
 *   before any route): an error answer with a JSON body is the document's `Error` body, whose
 *   first code is registered with this very status. Successful answers outside the API (the
 *   dashboard's pages, /docs, /metrics, the document itself) are not the document's to describe.
 */
type Media = { schema?: unknown };
type Response = { $ref?: string; content?: Record<string, Media> };
type Operation = { operationId: string; responses: Record<string, Response> };
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

/** A response, or the shared one it references (`#/components/responses/...`). */
function resolve(res: Response | undefined): Response | undefined {
  if (!res?.$ref) return res;
  const name = res.$ref.replace('#/components/responses/', '');
  return (components.responses as Record<string, Response> | undefined)?.[name];
}

/** The path of a request target; null for a target that is not a path (CONNECT's `host:port`, `*`). */
function pathnameOf(target: string): string | null {
  if (!target.startsWith('/')) return null;
  return new URL(target, 'http://x').pathname;
}

function operationAt(method: string, pathname: string): Operation | null {
  for (const r of load()) if (r.re.test(pathname) && r.ops[method]) return r.ops[method];
  return null;
}

/** The operation a request maps to, or null when the document does not describe it. */
export function findOperation(method: string, path: string): Operation | null {
  const pathname = pathnameOf(path);
  if (pathname === null) return null;
  const m = method.toLowerCase();
  // A merchant's own host serves its agent routes at the root (server/src/http/agent-host.ts).
  return operationAt(m, pathname) ?? (pathname.startsWith('/m/') ? null : operationAt(m, `/m/{merchant}${pathname}`));
}

export class OpenApiDriftError extends Error {}

/** The media type of a Content-Type header, without parameters (`text/html; charset=utf-8` -> `text/html`). */
const mediaTypeOf = (contentType: string | null) => contentType?.split(';')[0]!.trim().toLowerCase() || null;

function validator(key: string, schema: unknown): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ ...(schema as object), components });
    compiled.set(key, validate);
  }
  return validate;
}

function check(validate: ValidateFunction, value: unknown, where: string, text: string) {
  if (validate(value)) return;
  const errors = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message}${e.params ? ` ${JSON.stringify(e.params)}` : ''}`);
  throw new OpenApiDriftError(`OpenAPI drift: ${where}: ${errors.join('; ')}\nbody: ${text.slice(0, 2000)}`);
}

function parseJson(text: string, where: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new OpenApiDriftError(`OpenAPI drift: ${where}: the body is not JSON\nbody: ${text.slice(0, 2000)}`);
  }
}

/** Throws OpenApiDriftError when a response breaks the document. */
export function checkResponseAgainstOpenApi(method: string, path: string, status: number, contentType: string | null, text: string): void {
  load();
  const op = findOperation(method, path);
  const media = mediaTypeOf(contentType);
  if (!op) return checkOutsideTheApi(method, path, status, media, text);
  const where = `${method.toUpperCase()} ${path} -> ${status} (${op.operationId})`;
  const declared = resolve(op.responses[String(status)] ?? op.responses.default);
  if (!declared) throw new OpenApiDriftError(`OpenAPI drift: ${where}: status ${status} is not declared`);
  const types = Object.keys(declared.content ?? {});
  if (text.length === 0) {
    if (types.length > 0) throw new OpenApiDriftError(`OpenAPI drift: ${where}: an empty body where the document declares ${types.join(', ')}`);
    return;
  }
  if (types.length === 0) throw new OpenApiDriftError(`OpenAPI drift: ${where}: a ${media ?? 'untyped'} body where the document declares none`);
  const schema = media ? declared.content![media] : undefined;
  if (!schema) throw new OpenApiDriftError(`OpenAPI drift: ${where}: a ${media ?? 'untyped'} body where the document declares ${types.join(', ')}`);
  if (schema.schema === undefined) return;
  const value = media === 'application/json' ? parseJson(text, where) : text;
  check(validator(`${op.operationId} ${status} ${media}`, schema.schema), value, where, text);
}

/** An answer to a request the document does not describe: an error is the one error body, its first code registered with this status. */
function checkOutsideTheApi(method: string, path: string, status: number, media: string | null, text: string): void {
  if (status < 400 || text.length === 0 || media !== 'application/json') return;
  const where = `${method.toUpperCase()} ${path} -> ${status} (not in the document)`;
  const body = parseJson(text, where);
  check(validator('Error', { $ref: '#/components/schemas/Error' }), body, where, text);
  const first = (body as { reason_codes: (keyof typeof REASON_CODES)[] }).reason_codes[0]!;
  if (REASON_CODES[first].status !== status) {
    throw new OpenApiDriftError(`OpenAPI drift: ${where}: ${first} is registered with status ${REASON_CODES[first].status}\nbody: ${text.slice(0, 2000)}`);
  }
}
