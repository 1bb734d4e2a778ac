import { initClient, type AppRoute, type ContractNoBodyType } from '@ts-rest/core';
import { contract, routeTakesNoBody } from '@svc/contract';
import { pathParam, tsRestFetcher, type RequestOptions, type TransportConfig } from './http.js';
import { ListIterator, type Page } from './pagination.js';
import { unwrap, type RouteBody, type RouteQuery, type SuccessBody } from './types.js';

/**
 * The merchant client's namespaces, declared the way stripe-node declares its resources: a
 * table of methods, each naming the contract operation it calls (`method('merchants.create')`
 * calls `contract.merchants.create`). The route decides the arguments and the result, so a
 * method is one line and cannot drift from the contract:
 * - the path parameters first, in path order (each percent-encoded; an empty one throws);
 * - then the request body, when the route takes one;
 * - last the per-call RequestOptions, which also carry the route's query parameters when it
 *   has some (the `merchant_id` scoping, filters such as `available` or `tz`).
 * The method resolves to the success body (nothing for a 204) and throws the typed SvcApiError
 * for an error status. A `listMethod` returns a ListIterator over the route's pages instead,
 * its query (filters, `limit`, the first `cursor`) given before the RequestOptions.
 */

export function buildRawClient(config: TransportConfig, baseUrl: string) {
  return initClient(contract, { baseUrl, baseHeaders: {}, api: tsRestFetcher(config), jsonQuery: false });
}
/** The typed ts-rest client over the whole contract, with this client's auth, retries and timeouts. */
export type RawClient = ReturnType<typeof buildRawClient>;

type C = typeof contract;
/** A contract operation by its dotted name: `merchants.create` is `contract.merchants.create`. */
export type OperationName = { [K in keyof C & string]: `${K}.${keyof C[K] & string}` }[keyof C & string];
type RouteOf<N extends OperationName> = N extends `${infer K extends keyof C & string}.${infer O}`
  ? O extends keyof C[K]
    ? C[K][O] extends AppRoute
      ? C[K][O]
      : never
    : never
  : never;

/** One string argument per path parameter, in path order. */
type PathArgs<P extends string> = P extends `${string}:${string}/${infer Rest}` ? [string, ...PathArgs<`/${Rest}`>] : P extends `${string}:${string}` ? [string] : [];
type HasQuery<R extends AppRoute> = [RouteQuery<R>] extends [never] ? false : true;
type TakesBody<R extends AppRoute> = R extends { method: 'GET' } ? false : R extends { body: ContractNoBodyType } ? false : true;
type BodyArgs<R extends AppRoute, O extends MethodOptions> = TakesBody<R> extends true
  ? O extends { optionalBody: true }
    ? [body?: RouteBody<R>]
    : [body: RouteBody<R>]
  : [];
/** The per-call controls, with the route's query parameters when it has some. */
type OptionsOf<R extends AppRoute> = HasQuery<R> extends true ? RequestOptions & RouteQuery<R> : RequestOptions;
type ResultOf<R extends AppRoute> = [SuccessBody<R>] extends [undefined] ? void : SuccessBody<R>;
type ItemOf<P> = P extends { data: Array<infer T> } ? T : never;

export type MethodOptions = {
  /** The body may be left out; `{}` is sent (every field of the body is optional). */
  optionalBody?: true;
};
export type ListMethodOptions = {
  /** The query parameters come in the options argument, as a non-list method takes them. */
  query?: 'options';
};

/** A method of a resource: one request to the named contract operation. */
export type Method<N extends OperationName = OperationName, O extends MethodOptions = MethodOptions> = {
  readonly kind: 'call';
  readonly operation: N;
  readonly options: O;
};
/** A method of a resource that lists: a ListIterator over the named operation's pages. */
export type ListMethod<N extends OperationName = OperationName, O extends ListMethodOptions = ListMethodOptions> = {
  readonly kind: 'list';
  readonly operation: N;
  readonly options: O;
};
/** A route that pages with `cursor`, for `listMethod`. */
type ListOperationName = { [N in OperationName]: HasQuery<RouteOf<N>> extends true ? ('cursor' extends keyof RouteQuery<RouteOf<N>> ? N : never) : never }[OperationName];

export function method<const N extends OperationName, const O extends MethodOptions = {}>(operation: N, options?: O): Method<N, O> {
  return { kind: 'call', operation, options: options ?? ({} as O) };
}
export function listMethod<const N extends ListOperationName, const O extends ListMethodOptions = {}>(operation: N, options?: O): ListMethod<N, O> {
  return { kind: 'list', operation, options: options ?? ({} as O) };
}

type CallOf<R extends AppRoute, O extends MethodOptions> = (...args: [...PathArgs<R['path']>, ...BodyArgs<R, O>, options?: OptionsOf<R>]) => Promise<ResultOf<R>>;
type ListOf<R extends AppRoute, O extends ListMethodOptions> = O extends { query: 'options' }
  ? (...args: [...PathArgs<R['path']>, options?: OptionsOf<R>]) => ListIterator<ItemOf<SuccessBody<R>>, SuccessBody<R>>
  : (...args: [...PathArgs<R['path']>, query?: RouteQuery<R>, options?: RequestOptions]) => ListIterator<ItemOf<SuccessBody<R>>, SuccessBody<R>>;

type Table = Record<string, Method | ListMethod>;
/** A resource's methods as its table declares them. */
export type Methods<T extends Table> = {
  [K in keyof T]: T[K] extends Method<infer N, infer O> ? CallOf<RouteOf<N>, O> : T[K] extends ListMethod<infer N, infer O> ? ListOf<RouteOf<N>, O> : never;
};

/** A resource class: `new Resource(raw)` has one method per entry of the table. */
export function resource<T extends Table>(table: T): new (raw: RawClient) => Methods<T> {
  const bound = Object.entries(table).map(([name, m]) => [name, prepare(m)] as const);
  // The methods exist at runtime only once the table is read, so the class is typed by the table.
  return class {
    constructor(raw: RawClient) {
      for (const [name, call] of bound) Object.assign(this, { [name]: (...args: unknown[]) => call(raw, args) });
    }
  } as new (raw: RawClient) => Methods<T>;
}

type RawRequest = { params: Record<string, string>; body?: unknown; query?: unknown; svc?: RequestOptions | undefined };
type RawCall = (request: RawRequest) => Promise<{ status: number; body: unknown; headers: Headers }>;

function routeAt(operation: string): { resource: string; name: string; route: AppRoute } {
  const [resource = '', name = ''] = operation.split('.');
  const route = (contract as Record<string, Record<string, AppRoute>>)[resource]?.[name];
  if (!route) throw new Error(`no contract operation ${operation}`);
  return { resource, name, route };
}

function rawCall(raw: RawClient, resource: string, name: string): RawCall {
  // The ts-rest client is typed per route; the table reaches it by the operation's name.
  return (raw as unknown as Record<string, Record<string, RawCall>>)[resource]![name]!;
}

/** Splits `merchant_id` and the other query parameters from the per-call controls. */
function splitOptions(options: unknown): { query: Record<string, unknown>; svc: RequestOptions } {
  const { idempotencyKey, signal, timeoutMs, maxRetries, ...query } = (options ?? {}) as RequestOptions & Record<string, unknown>;
  return { query, svc: { idempotencyKey, signal, timeoutMs, maxRetries } };
}

/** How the arguments of a call map onto its route's request, read once from the route. */
function prepare(m: Method | ListMethod): (raw: RawClient, args: unknown[]) => unknown {
  const { resource, name, route } = routeAt(m.operation);
  const pathParams = [...route.path.matchAll(/:(\w+)/g)].map((match) => match[1]!);
  const takesBody = route.method !== 'GET' && 'body' in route && !routeTakesNoBody(route.body);
  const takesQuery = route.query !== undefined;
  const optionalBody = m.kind === 'call' && m.options.optionalBody === true;
  const queryInOptions = m.kind === 'list' && m.options.query === 'options';
  // The path parameters, then the body: the arguments before the query and the options.
  const requestOf = (args: unknown[]): { request: RawRequest; next: number } => {
    const params = Object.fromEntries(pathParams.map((param, i) => [param, pathParam(param, args[i] as string)]));
    let next = pathParams.length;
    const request: RawRequest = { params };
    if (takesBody) request.body = args[next++] ?? (optionalBody ? {} : undefined);
    return { request, next };
  };
  if (m.kind === 'list') {
    return (raw, args) => {
      const call = rawCall(raw, resource, name);
      const { request, next } = requestOf(args);
      const { query, svc } = queryInOptions ? splitOptions(args[next]) : { query: (args[next] ?? {}) as Record<string, unknown>, svc: args[next + 1] as RequestOptions | undefined };
      const first = typeof query.cursor === 'string' ? query.cursor : undefined;
      return new ListIterator(async (cursor) => unwrap(await call({ ...request, query: { ...query, cursor }, svc })) as Page<unknown>, first);
    };
  }
  // Async, so a bad argument (an empty path parameter) rejects the returned promise like an error status does.
  return async (raw, args) => {
    const call = rawCall(raw, resource, name);
    const { request, next } = requestOf(args);
    if (!takesQuery) return unwrap(await call({ ...request, svc: args[next] as RequestOptions | undefined }));
    const { query, svc } = splitOptions(args[next]);
    return unwrap(await call({ ...request, query, svc }));
  };
}
