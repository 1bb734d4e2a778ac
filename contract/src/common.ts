import { initContract, isAppRouteNoBody } from '@ts-rest/core';
import { z } from 'zod';
import { ErrorBody } from './errors.js';

/** Annotated so the emitted .d.ts can name its type (TS4023 otherwise). */
export const c: ReturnType<typeof initContract> = initContract();

/**
 * Whether a route declares no body (`c.noBody()`). ts-rest marks it with a symbol of its own
 * copy, so the check must come from the copy that made the routes: a consumer's npm may install
 * @ts-rest/core twice (once under @svc/contract, once under @svc/sdk, each beside its zod 3 when
 * the project's zod is 4), and the SDK's copy would not know this copy's symbol.
 */
export const routeTakesNoBody = (body: Parameters<typeof isAppRouteNoBody>[0]): boolean => isAppRouteNoBody(body);

export const SCOPES = [
  'merchants:read',
  'merchants:write',
  'products:read',
  'products:write',
  'policy:read',
  'policy:write',
  'orders:read',
  'orders:write',
  'refunds:read',
  'refunds:write',
  'ingest:write',
  'webhooks:read',
  'webhooks:write',
  'keys:read',
  'keys:write',
] as const;
export const Scope = z.enum(SCOPES);
export type Scope = z.infer<typeof Scope>;
/** A stored or typed scope name that this version knows. */
export const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

/** A key's mode, and with it the mode of everything it touches. */
export const Mode = z.enum(['test', 'live']);
export type Mode = z.infer<typeof Mode>;

/**
 * Route metadata read by the server's auth middleware and by the OpenAPI generator.
 * `auth: 'key'` routes need a Bearer key carrying every scope in `scopes`, or a signed-in
 * member's session cookie; `auth: 'session'` routes need the session cookie; `auth: 'operator'` the local operator token.
 */
export type RouteMeta = {
  auth: 'key' | 'public' | 'session' | 'operator';
  scopes: readonly Scope[];
  tag: string;
  operationId: string;
};
export const meta = (m: RouteMeta) => m;

/**
 * Error statuses every API-key (or session) route can answer (503 DATABASE_UNAVAILABLE while the
 * database is down): the `commonResponses` of those routers, so a route lists only its own.
 */
export const keyErrors = {
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  413: ErrorBody,
  429: ErrorBody,
  500: ErrorBody,
  503: ErrorBody,
} as const;

/** Error statuses every public route can answer (503 DATABASE_UNAVAILABLE while the database is down): the `commonResponses` of public routers. */
export const publicErrors = {
  400: ErrorBody,
  404: ErrorBody,
  413: ErrorBody,
  500: ErrorBody,
  503: ErrorBody,
} as const;

export const IsoTimestamp = z.string().describe('ISO 8601 UTC timestamp');

export const prefixedId = (prefix: string) =>
  z
    .string()
    .regex(new RegExp(`^${prefix}_[0-9a-z]{26}$`), `must be an id starting with ${prefix}_`)
    .describe(`Id with prefix ${prefix}_`);

/**
 * An id in a path or query parameter. Any string is accepted here: an id that cannot exist
 * (wrong prefix, wrong length) is answered like one that does not exist, 404 NOT_FOUND, so
 * callers have a single branch (the services check the shape before querying).
 */
export const idRef = (prefix: string) => z.string().describe(`Id with prefix ${prefix}_; an unknown id of any shape is 404 NOT_FOUND.`);

export const ListQuery = (defaultLimit: number) =>
  z
    .object({
      limit: z.coerce.number().int().min(1).max(100).default(defaultLimit),
      cursor: z.string().min(1).max(200).optional().describe('The previous page\'s next_cursor.'),
    })
    .strict();

export const listEnvelope = <T extends z.ZodTypeAny>(item: T) =>
  z.object({
    data: z.array(item),
    has_more: z.boolean(),
    next_cursor: z.string().nullable(),
  });

export const MerchantIdQuery = z
  .object({ merchant_id: idRef('mrch').optional().describe('Defaults to the project\'s default merchant in the key\'s mode.') })
  .strict();

/** Exact decimal string for money: never a JSON number. */
export const DecimalString = z.string().regex(/^\d{1,12}(\.\d{1,8})?$/, 'must be a decimal string like "12.50"');

/** The key under which a `serviceValidated` wire schema carries the schema it is typed and documented as. */
export const SERVICE_VALIDATED = Symbol.for('svc.serviceValidated');

/**
 * A request field the route lets through as `wire` so the service validates it and answers its
 * own reason codes (RECEIVING_*, POLICY_*) instead of a generic VALIDATION_FAILED, while clients
 * compile against `typed`: ts-rest infers a client's request from a schema's input type and the
 * server's from its output type, so the SDK gets `z.input<typed>` field by field and the handler
 * gets the unvalidated `z.output<wire>` it must hand to the validator. The OpenAPI document
 * describes `typed` (scripts/emit-openapi.ts, via `documentedAs`). docs/decisions.md explains why.
 */
export function serviceValidated<T extends z.ZodTypeAny, W extends z.ZodTypeAny>(typed: T, wire: W): z.ZodType<z.output<W>, z.ZodTypeDef, z.input<T>> {
  return Object.assign(wire, { [SERVICE_VALIDATED]: typed }) as unknown as z.ZodType<z.output<W>, z.ZodTypeDef, z.input<T>>;
}

/** The schema a `serviceValidated` wire schema is typed and documented as; undefined for any other schema. */
export function documentedAs(schema: unknown): z.ZodTypeAny | undefined {
  return typeof schema === 'object' && schema !== null ? (schema as { [SERVICE_VALIDATED]?: z.ZodTypeAny })[SERVICE_VALIDATED] : undefined;
}

/**
 * An IANA time zone name (`Europe/Paris`, `America/New_York`, `UTC`) that this runtime's Intl
 * knows. UTC offsets such as `+05:00` are refused: Intl reads them one way and POSIX-style
 * zone strings the opposite way, and a fixed offset has no daylight-saving days anyway.
 */
export function isIanaTimeZone(tz: string): boolean {
  if (!/^[A-Za-z][A-Za-z0-9_+-]*(\/[A-Za-z0-9_+-]+)*$/.test(tz)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: tz });
    return true;
  } catch {
    return false;
  }
}

export const TimeZoneName = z
  .string()
  .max(64)
  .refine(isIanaTimeZone, 'must be an IANA time zone name such as Europe/Paris')
  .describe('IANA time zone name, e.g. Europe/Paris.');

/** An ISO 8601 timestamp with a zone (`Z` or an offset) in a query parameter. */
export const IsoTimestampQuery = z.string().datetime({ offset: true, message: 'must be an ISO 8601 timestamp with a zone, e.g. 2026-11-21T00:00:00Z' });
