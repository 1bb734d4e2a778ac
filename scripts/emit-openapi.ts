/**
 * Emits openapi/openapi.json from the contract (@svc/contract).
 *
 * `npm run openapi` runs this, then openapi-typescript for openapi/schema.d.ts; the
 * staleness test (server/test/openapi.test.ts) calls `renderOpenApi()` and compares bytes.
 * Everything below walks the contract, so new routes need nothing here beyond their RouteMeta.
 */
import { mkdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isAppRoute, isAppRouteOtherResponse, type AppRoute, type AppRouter } from '@ts-rest/core';
import { generateOpenApi } from '@ts-rest/open-api';
import * as schemas from '@svc/contract';
import { c, contract, documentedAs, ErrorBody, REASON_CODES, type RouteMeta } from '@svc/contract';
import type { z } from 'zod';

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

import { OPENAPI_EXAMPLES, TAG_DESCRIPTIONS } from './openapi-examples.js';

export const OPENAPI_JSON_PATH = fileURLToPath(new URL('../openapi/openapi.json', import.meta.url));
export const SCHEMA_DTS_PATH = fileURLToPath(new URL('../openapi/schema.d.ts', import.meta.url));

export type ContractRoute = {
  /** Dotted position in the contract, e.g. `merchants.create`. */
  name: string;
  route: AppRoute;
  meta: RouteMeta;
  /** The path in OpenAPI form (`/v1/merchants/{id}`). */
  openApiPath: string;
  /** Lower-case HTTP method as used for OpenAPI operation keys. */
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
};

function isRouteMeta(m: unknown): m is RouteMeta {
  if (typeof m !== 'object' || m === null) return false;
  const r = m as Record<string, unknown>;
  return (
    (r.auth === 'key' || r.auth === 'public' || r.auth === 'session' || r.auth === 'operator') &&
    Array.isArray(r.scopes) &&
    typeof r.tag === 'string' &&
    r.tag.length > 0 &&
    typeof r.operationId === 'string' &&
    r.operationId.length > 0
  );
}

/** Every route of a ts-rest router with its RouteMeta; throws on a route without metadata or a repeated operationId. */
export function contractRoutes(router: AppRouter = contract): ContractRoute[] {
  const out: ContractRoute[] = [];
  const walk = (r: AppRouter, prefix: string[]) => {
    for (const [key, value] of Object.entries(r)) {
      const name = [...prefix, key].join('.');
      if (isAppRoute(value)) {
        if (!isRouteMeta(value.metadata)) {
          throw new Error(`contract route ${name} has no RouteMeta metadata (auth, scopes, tag, operationId)`);
        }
        out.push({
          name,
          route: value,
          meta: value.metadata,
          openApiPath: value.path.replace(/:(\w+)/g, '{$1}'),
          method: value.method.toLowerCase() as ContractRoute['method'],
        });
      } else {
        walk(value, [...prefix, key]);
      }
    }
  };
  walk(router, []);
  const seen = new Map<string, string>();
  for (const r of out) {
    const other = seen.get(r.meta.operationId);
    if (other) throw new Error(`operationId ${r.meta.operationId} is used by both ${other} and ${r.name}`);
    seen.set(r.meta.operationId, r.name);
  }
  return out;
}

/** The idempotency middleware applies to every key-auth POST (server/src/http/idempotency.ts). */
export const takesIdempotencyKey = (r: ContractRoute) => (r.method === 'post' || r.method === 'put') && r.meta.auth === 'key';

// Fixed texts rather than node's STATUS_CODES, whose wording changes between Node versions.
const STATUS_TEXT: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '202': 'Accepted',
  '204': 'No Content',
  '303': 'See Other',
  '304': 'Not Modified',
  '400': 'Bad Request: malformed JSON or failed validation',
  '401': 'Unauthenticated: missing, unknown or revoked API key',
  '402': 'Payment Required',
  '403': 'Forbidden: missing scope or wrong mode',
  '404': 'Not Found (also cross-mode access)',
  '409': 'Conflict',
  '410': 'Gone',
  '413': 'Payload Too Large (over 256 KB)',
  '422': 'Unprocessable Entity',
  '429': 'Too Many Requests',
  '500': 'Internal Server Error',
  '503': 'Service Unavailable',
};

/**
 * What Node's HTTP server answers before any route, to a request for any operation
 * (server/src/http/transport-errors.ts), as shared responses every operation references; the
 * 400 of a malformed request or a missing Host is each operation's own 400.
 */
const TRANSPORT_RESPONSES: Record<string, { name: string; description: string }> = {
  '408': { name: 'RequestTimeout', description: 'Request Timeout: the request was not received in time (REQUEST_TIMEOUT)' },
  '417': { name: 'ExpectationFailed', description: 'Expectation Failed: an Expect header other than 100-continue (EXPECTATION_FAILED)' },
  '431': { name: 'RequestHeadersTooLarge', description: 'Request Header Fields Too Large: headers over 16 KB (REQUEST_HEADERS_TOO_LARGE)' },
};

const IDEMPOTENCY_KEY_PARAM: JsonObject = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Optional. A repeat of the same request with the same key within 24 hours replays the first response ' +
    '(with header Idempotent-Replayed: true); the same key with a different request is 409 IDEMPOTENCY_KEY_REUSED; ' +
    'a repeat while the first is still running is 409 IDEMPOTENCY_KEY_IN_PROGRESS.',
  schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[!-~]{1,255}$' },
};

const IDEMPOTENT_REPLAYED_HEADER: JsonObject = {
  description: 'Present (value true) when this response is a replay of an earlier request with the same Idempotency-Key.',
  schema: { type: 'string', enum: ['true'] },
};

function authText(meta: RouteMeta): string {
  if (meta.auth === 'public') return 'Auth: public, no API key.';
  if (meta.auth === 'operator') return 'Auth: the local operator token (Bearer) from <SVC_DATA_DIR>/operator.json, from loopback only.';
  if (meta.auth === 'session') return 'Auth: the signed-in member\'s session cookie (svc_session); writes need a same-origin Origin header.';
  if (meta.scopes.length === 0) return 'Auth: API key (Bearer); any scope.';
  const list = meta.scopes.map((s) => `\`${s}\``).join(', ');
  return `Auth: API key (Bearer) with scope${meta.scopes.length > 1 ? 's' : ''} ${list}, or a signed-in member's session cookie.`;
}

/** The ErrorBody schema exactly as the generator renders it, for responses this script adds. */
function errorBodySchema(): Json {
  const probe = generateOpenApi(
    c.router({ probe: { method: 'GET', path: '/probe', responses: { 400: ErrorBody } } }),
    { info: { title: 'probe', version: '0' } },
  ) as unknown as { paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: Json }> }> } }> };
  return probe.paths['/probe']!.get.responses['400']!.content['application/json']!.schema;
}

/** A Zod schema as the generator renders it. */
function schemaOf(schema: z.ZodTypeAny): Json {
  const probe = generateOpenApi(c.router({ probe: { method: 'GET', path: '/probe', responses: { 200: schema } } }), { info: { title: 'probe', version: '0' } }) as unknown as {
    paths: Record<string, { get: { responses: Record<string, { content: Record<string, { schema: Json }> }> } }>;
  };
  return probe.paths['/probe']!.get.responses['200']!.content['application/json']!.schema;
}

/**
 * Documents every `serviceValidated` field of the routes' request bodies as its typed schema:
 * the generator reads `metaOpenApi` (@anatine/zod-openapi's extension point) over what the
 * wire schema would render. The wire schema still validates at runtime.
 */
function documentServiceValidated(routes: ContractRoute[]) {
  const seen = new Set<unknown>();
  const visit = (schema: unknown) => {
    if (typeof schema !== 'object' || schema === null || seen.has(schema) || !('_def' in schema)) return;
    seen.add(schema);
    const typed = documentedAs(schema);
    if (typed) Object.assign(schema, { metaOpenApi: schemaOf(typed) });
    const def = (schema as { _def: Record<string, unknown> })._def;
    const shape = typeof def.shape === 'function' ? (def.shape as () => Record<string, unknown>)() : undefined;
    for (const child of [def.innerType, def.schema, def.type, ...(shape ? Object.values(shape) : []), ...(Array.isArray(def.options) ? def.options : [])]) visit(child);
  };
  for (const r of routes) visit((r.route as { body?: unknown }).body);
}

/** Recursively rebuilds objects with keys in code-unit order and drops undefined values; arrays keep their order. */
function sortKeys(value: unknown): Json {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === 'object') {
    const out: JsonObject = {};
    for (const k of Object.keys(value).sort()) {
      const v = (value as Record<string, unknown>)[k];
      if (v !== undefined) out[k] = sortKeys(v);
    }
    return out;
  }
  return value as Json;
}

function packageVersion(): string {
  const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: string };
  if (!pkg.version) throw new Error('package.json has no version');
  return pkg.version;
}

/** The OpenAPI document as an object (keys not yet sorted). */
export function buildOpenApiDocument(router: AppRouter = contract): JsonObject {
  const routes = contractRoutes(router);
  const tags = [...new Set(routes.map((r) => r.meta.tag))].sort();
  documentServiceValidated(routes);
  const doc = generateOpenApi(
    router,
    {
      info: {
        title: 'svc-checkout',
        version: packageVersion(),
        license: { name: 'Apache-2.0', url: 'https://www.apache.org/licenses/LICENSE-2.0' },
        description:
          'Hosted checkout for AI agents. Merchants configure a catalog, a receiving destination and a versioned ' +
          'acceptance policy through the management API (/v1, Bearer API key). Agents discover a merchant, open a ' +
          'checkout session and settle in USDC over x402, receiving an Ed25519-signed receipt. The key decides the ' +
          'mode: svc_test_ keys act on test merchants (mock facilitator, base-sepolia), svc_live_ keys on live ' +
          'merchants (base). Every error body is {reason_codes, error_human}.',
      },
      servers: [{ url: '/', description: 'The server this document is served from (GET /openapi.json); `npm start` listens on http://localhost:3000' }],
      components: {
        securitySchemes: {
          bearerAuth: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'svc_test_... or svc_live_... API key',
            description: 'An API key in Authorization: Bearer <API_KEY>. The key\'s prefix sets the mode (test or live).',
          },
          operatorToken: {
            type: 'http',
            scheme: 'bearer',
            bearerFormat: 'svc_op_... token from <SVC_DATA_DIR>/operator.json',
            description: 'The running server\'s local operator token (mode-0600 file in its data directory); accepted from loopback only.',
          },
          sessionCookie: {
            type: 'apiKey',
            in: 'cookie',
            name: 'svc_session',
            description:
              'A signed-in member (POST /v1/auth/email/start, then the mailed link). Every scope; the Svc-Mode header (test, the default, or live) and Svc-Project header select mode and project. Cookie writes need a same-origin Origin header (403 CSRF_REJECTED).',
          },
        },
      },
      tags: tags.map((name) => ({ name, ...(TAG_DESCRIPTIONS[name] ? { description: TAG_DESCRIPTIONS[name] } : {}) })),
    },
    { jsonQuery: false },
  ) as unknown as JsonObject;

  const paths = doc.paths as Record<string, Record<string, JsonObject>>;
  let errorSchema: Json | undefined;
  for (const r of routes) {
    const op = paths[r.openApiPath]?.[r.method];
    if (!op) throw new Error(`generator produced no operation for ${r.name} (${r.method.toUpperCase()} ${r.openApiPath})`);
    const { meta } = r;
    op.operationId = meta.operationId;
    op.tags = [meta.tag];
    const base = typeof r.route.description === 'string' && r.route.description ? `${r.route.description}\n\n` : '';
    op.description = base + authText(meta) + (takesIdempotencyKey(r) ? ' Accepts an Idempotency-Key header.' : '');
    if (meta.auth === 'key') {
      op.security = [{ bearerAuth: [] }, { sessionCookie: [] }];
      op['x-scopes'] = [...meta.scopes];
    } else if (meta.auth === 'session') {
      op.security = [{ sessionCookie: [] }];
    } else if (meta.auth === 'operator') {
      op.security = [{ operatorToken: [] }];
    } else {
      op.security = [];
    }

    const responses = op.responses as Record<string, JsonObject>;
    for (const [status, res] of Object.entries(responses)) {
      if (res.description === status) res.description = STATUS_TEXT[status] ?? status;
    }
    // The generator documents JSON bodies only; a body of another type (the sign-in link's HTML
    // pages, `c.otherResponse`) is its declared media type, described by its schema's description.
    for (const [status, declared] of Object.entries(r.route.responses)) {
      if (!isAppRouteOtherResponse(declared)) continue;
      const page = declared.body as z.ZodTypeAny;
      const { description, ...schema } = schemaOf(page) as JsonObject;
      responses[status] = {
        description: page.description ?? (description as string | undefined) ?? STATUS_TEXT[status] ?? status,
        content: { [declared.contentType]: { schema } },
      };
    }
    const body = r.route.method === 'GET' ? undefined : (r.route as { body?: unknown }).body;
    const requestBody = op.requestBody as JsonObject | undefined;
    if (requestBody && body && typeof body === 'object' && 'isOptional' in body && typeof body.isOptional === 'function') {
      requestBody.required = !body.isOptional();
    }

    if (takesIdempotencyKey(r)) {
      const params = (op.parameters as Json[] | undefined) ?? [];
      op.parameters = [...params, IDEMPOTENCY_KEY_PARAM];
      for (const [status, res] of Object.entries(responses)) {
        if (status.startsWith('2')) res.headers = { 'Idempotent-Replayed': IDEMPOTENT_REPLAYED_HEADER };
      }
      if (!responses['409']) {
        errorSchema ??= errorBodySchema();
        responses['409'] = {
          description: 'Conflict: IDEMPOTENCY_KEY_REUSED or IDEMPOTENCY_KEY_IN_PROGRESS',
          content: { 'application/json': { schema: errorSchema } },
        };
      }
    }
    if (!responses['400']) throw new Error(`${r.name} declares no 400: a malformed request or one without Host is answered 400 on every route`);
    for (const [status, shared] of Object.entries(TRANSPORT_RESPONSES)) responses[status] ??= { $ref: `#/components/responses/${shared.name}` };
    if (Array.isArray(op.parameters) && op.parameters.length === 0) delete op.parameters;
    applyExamples(op, OPENAPI_EXAMPLES[meta.operationId]);
  }
  dropUntypedNullable(doc);
  nullableEnumsAdmitNull(doc);
  nameComponentSchemas(doc);
  (doc.components as JsonObject).responses = Object.fromEntries(
    Object.values(TRANSPORT_RESPONSES).map(({ name, description }) => [name, { description, content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } }]),
  );
  doc['x-webhooks'] = webhookOperations();
  return doc;
}

/** A delay as the docs write it: 30 s, 2 min, 1 h (the largest unit that divides it). */
function delayText(ms: number): string {
  if (ms % 3_600_000 === 0) return `${ms / 3_600_000} h`;
  if (ms % 60_000 === 0) return `${ms / 60_000} min`;
  return `${ms / 1000} s`;
}

/** The delivery schedule in words, from the constant the delivery worker runs (contract/src/webhooks.ts). */
export function webhookRetryText(schedule: readonly number[] = schemas.WEBHOOK_RETRY_SCHEDULE_MS): string {
  const [first, ...later] = schedule;
  if (first !== 0 || later.length === 0) throw new Error('the webhook schedule must start with an immediate attempt and have a retry');
  const delays = later.map(delayText);
  return (
    `Anything else is a failed attempt: ${schedule.length} attempts in all, the first at once and the others ` +
    `${delays.slice(0, -1).join(', ')} and ${delays.at(-1)} after the delivery was enqueued; after the last one fails the ` +
    'delivery is failed for good (POST /v1/events/{id}/replay sends the event again).'
  );
}

/**
 * What svc-checkout POSTs to a merchant's webhook endpoints (docs/webhooks.md), one entry per
 * event type: OpenAPI 3.0 has no `webhooks` object, so this is `x-webhooks` (Redoc renders it).
 */
function webhookOperations(): JsonObject {
  const header = (name: string, description: string, pattern: string): JsonObject => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string', pattern },
  });
  const out: JsonObject = {};
  for (const type of schemas.WebhookEventType.options) {
    const test = type === schemas.ENDPOINT_TEST_EVENT_TYPE;
    out[type] = {
      post: {
        operationId: `webhook_${type.replace('.', '_')}`,
        tags: ['Webhooks'],
        summary: test
          ? `The ${type} event, POSTed only to the endpoint named by POST /v1/webhooks/endpoints/{id}/test (never an order: acknowledge it, fulfil nothing)`
          : `The ${type} event, POSTed to every enabled endpoint subscribed to it`,
        description:
          'Verify Svc-Signature over the raw body before parsing (HMAC-SHA256 with the endpoint\'s whsec_ secret; the SDK\'s verifyWebhook), deduplicate on Svc-Event-Id, answer 2xx within 10 s. ' +
          webhookRetryText(),
        parameters: [
          header('Svc-Signature', 't=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">; a second v1 during a secret rotation.', '^t=\\d+(,v1=[0-9a-f]{64})+$'),
          header('Svc-Event-Id', 'The event id (evt_...): deduplicate on it.', '^evt_[0-9a-z]{26}$'),
          header('Svc-Delivery-Id', 'This attempt (wha_...), new on every attempt.', '^wha_[0-9a-z]{26}$'),
        ],
        // Authenticated by the signature, not by an API key of ours.
        security: [],
        requestBody: { required: true, content: { 'application/json': { schema: { $ref: '#/components/schemas/WebhookEvent' } } } },
        responses: { '200': { description: 'Any 2xx acknowledges the delivery.' }, '400': { description: 'Anything else (or no answer in 10 s) is retried.' } },
      },
    };
  }
  return out;
}

/**
 * The resources integrators name, as reusable components: every subtree of the document equal
 * to one of these schemas becomes a `$ref`, so generated clients get one type per resource
 * (largest first, so a resource inside another is referenced there too).
 */
const NAMED_SCHEMAS: Record<string, z.ZodTypeAny> = {
  Error: ErrorBody,
  Merchant: schemas.Merchant,
  ReceivingConfig: schemas.ReceivingConfig,
  PublicJwk: schemas.PublicJwk,
  Jwks: schemas.Jwks,
  CatalogItem: schemas.CatalogItem,
  MerchantPolicy: schemas.MerchantPolicy,
  PolicyVersion: schemas.ActivePolicy,
  StoredPolicyVersion: schemas.StoredPolicyVersion,
  OrdersSummary: schemas.OrdersSummary,
  PolicyFinding: schemas.Finding,
  PublishRefused: schemas.PublishConflict,
  Order: schemas.Order,
  OrderEventObject: schemas.OrderEventObject,
  Manifest: schemas.Manifest,
  Total: schemas.Total,
  PaymentRequired: schemas.PaymentRequired,
  CheckoutCreated: schemas.CheckoutCreated,
  Verdict: schemas.VerdictView,
  CheckoutSession: schemas.SessionView,
  X402Authorization: schemas.X402Authorization,
  SettleAccepted: schemas.SettleAccepted,
  SettleHeld: schemas.SettleHeld,
  SettlePending: schemas.SettlePending,
  SettlePaymentInvalid: schemas.SettlePaymentInvalid,
  SettleRejected: schemas.SettleRejected,
  X402Challenge: schemas.X402Challenge,
  X402RequirementsV1: schemas.X402RequirementsV1,
  X402Purchase: schemas.X402Purchase,
  X402Deferred: schemas.X402Deferred,
  AgentReputation: schemas.AgentReputation,
  WebhookEndpoint: schemas.WebhookEndpoint,
  WebhookEndpointWithSecret: schemas.WebhookEndpointWithSecret,
  WebhookEvent: schemas.WebhookEvent,
  OrderWebhookEvent: schemas.OrderWebhookEvent,
  RefundWebhookEvent: schemas.RefundWebhookEvent,
  Refund: schemas.Refund,
  RefundEventObject: schemas.RefundEventObject,
  EndpointTestWebhookEvent: schemas.EndpointTestWebhookEvent,
  WebhookEndpointTestObject: schemas.WebhookEndpointTestObject,
  WebhookEventDetail: schemas.WebhookEventDetail,
  ReplayResult: schemas.ReplayResult,
  ApiKey: schemas.ApiKeyObject,
  ApiKeyWithSecret: schemas.ApiKeyWithSecret,
};

function normalized(schema: z.ZodTypeAny): Json {
  const json = schemaOf(schema);
  dropUntypedNullable(json);
  nullableEnumsAdmitNull(json);
  return json;
}

function nameComponentSchemas(doc: JsonObject): void {
  const entries = Object.entries(NAMED_SCHEMAS).map(([name, schema]) => ({ name, json: normalized(schema) }));
  // Largest first: the walk stops at a match, and components are then walked for smaller ones.
  entries.sort((a, b) => JSON.stringify(b.json).length - JSON.stringify(a.json).length);
  const byText = new Map<string, string>();
  for (const e of entries) if (!byText.has(JSON.stringify(sortKeys(e.json)))) byText.set(JSON.stringify(sortKeys(e.json)), e.name);
  const ref = (name: string): JsonObject => ({ $ref: `#/components/schemas/${name}` });
  const replaceIn = (node: Json, skipRoot: boolean): Json => {
    if (Array.isArray(node)) return node.map((n) => replaceIn(n, false));
    if (!node || typeof node !== 'object') return node;
    if (!skipRoot) {
      const name = byText.get(JSON.stringify(sortKeys(node)));
      if (name) return ref(name);
    }
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(node)) out[k] = k === 'example' || k === 'examples' ? v : replaceIn(v, false);
    return out;
  };
  doc.paths = replaceIn(doc.paths as Json, true);
  const components = (doc.components ??= {}) as JsonObject;
  const named: JsonObject = {};
  for (const e of entries) named[e.name] = replaceIn(e.json, true);
  // The error body once, its codes an enum of the registry's.
  const error = named.Error as JsonObject;
  const codes = ((error.properties as JsonObject).reason_codes as JsonObject).items as JsonObject;
  codes.enum = Object.keys(REASON_CODES).sort();
  // Only what the document references (directly or through another component).
  const used = new Set<string>();
  const collect = (node: Json): void => {
    if (Array.isArray(node)) return node.forEach(collect);
    if (!node || typeof node !== 'object') return;
    const target = typeof node.$ref === 'string' ? node.$ref.replace('#/components/schemas/', '') : null;
    if (target && !used.has(target)) {
      used.add(target);
      collect(named[target] as Json);
    }
    for (const v of Object.values(node)) collect(v);
  };
  collect(doc.paths as Json);
  components.schemas = Object.fromEntries(Object.entries(named).filter(([name]) => used.has(name)));
}

function applyExamples(op: JsonObject, example: (typeof OPENAPI_EXAMPLES)[string] | undefined) {
  if (!example) return;
  const json = (holder: JsonObject | undefined) => (holder?.content as Record<string, JsonObject> | undefined)?.['application/json'];
  if (example.request !== undefined) {
    const media = json(op.requestBody as JsonObject | undefined);
    if (!media) throw new Error(`example request for ${String(op.operationId)} but it has no JSON body`);
    media.example = example.request as Json;
  }
  for (const [status, body] of Object.entries(example.responses ?? {})) {
    const media = json((op.responses as Record<string, JsonObject>)[status]);
    if (!media) throw new Error(`example for ${String(op.operationId)} ${status} but that response has no JSON body`);
    media.example = body as Json;
  }
}

/**
 * Zod's unknown/any become `{nullable: true}` with no type, which OpenAPI 3.0 forbids
 * (nullable qualifies a type); an untyped schema already admits null, so drop the flag.
 */
function dropUntypedNullable(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(dropUntypedNullable);
    return;
  }
  if (!node || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  if ('nullable' in obj && !('type' in obj) && !('$ref' in obj) && !('allOf' in obj) && !('oneOf' in obj) && !('anyOf' in obj)) delete obj.nullable;
  for (const [k, v] of Object.entries(obj)) if (k !== 'example') dropUntypedNullable(v);
}

/**
 * A nullable enum must list null among its values: validators (Ajv) check `enum` after
 * `nullable` lets null past the type, so `{enum: ["a"], nullable: true}` rejects a real null.
 * Zod's z.null() comes out as `{type: "string", format: "null", nullable: true}`: made `enum: [null]`.
 */
function nullableEnumsAdmitNull(node: unknown): void {
  if (Array.isArray(node)) {
    node.forEach(nullableEnumsAdmitNull);
    return;
  }
  if (!node || typeof node !== 'object') return;
  const obj = node as Record<string, unknown>;
  if (obj.nullable === true && obj.format === 'null') {
    delete obj.format;
    obj.enum = [null];
  }
  if (obj.nullable === true && Array.isArray(obj.enum) && !obj.enum.includes(null)) obj.enum = [...obj.enum, null];
  for (const [k, v] of Object.entries(obj)) if (k !== 'example') nullableEnumsAdmitNull(v);
}

/** The exact bytes of openapi/openapi.json: sorted keys, two-space indent, trailing newline. */
export function renderOpenApi(router: AppRouter = contract): string {
  return `${JSON.stringify(sortKeys(buildOpenApiDocument(router)), null, 2)}\n`;
}

function main() {
  const text = renderOpenApi();
  mkdirSync(fileURLToPath(new URL('../openapi/', import.meta.url)), { recursive: true });
  writeFileSync(OPENAPI_JSON_PATH, text);
  const n = contractRoutes().length;
  process.stdout.write(`wrote ${OPENAPI_JSON_PATH} (${n} operations)\n`);
}

function invokedDirectly(): boolean {
  try {
    return !!process.argv[1] && pathToFileURL(realpathSync(process.argv[1])).href === import.meta.url;
  } catch {
    return false;
  }
}
if (invokedDirectly()) main();
