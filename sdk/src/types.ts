import type { AppRoute, ClientInferRequest, ClientInferResponses, SuccessfulHttpStatusCode } from '@ts-rest/core';
import { SvcApiError } from './errors.js';

/** The 2xx members of a route's response union, as the ts-rest client types them. */
export type SuccessResponse<R extends AppRoute> = Extract<ClientInferResponses<R>, { status: SuccessfulHttpStatusCode }>;
/** The body of a route's success response(s), inferred from the contract. */
export type SuccessBody<R extends AppRoute> = SuccessResponse<R>['body'];
/** A route's request body (the Zod input type), inferred from the contract. */
export type RouteBody<R extends AppRoute> = ClientInferRequest<R> extends { body: infer B } ? B : never;
/** A route's query parameters (the Zod input type), inferred from the contract. */
export type RouteQuery<R extends AppRoute> = ClientInferRequest<R> extends { query: infer Q } ? Q : never;

type AnyResponse = { status: number; body: unknown; headers?: Headers };
type SuccessOf<T extends AnyResponse> = Extract<T, { status: SuccessfulHttpStatusCode }>['body'];

/** Returns the success body of a ts-rest client response, or throws the typed SvcApiError. */
export function unwrap<T extends AnyResponse>(res: T): SuccessOf<T> {
  if (res.status >= 200 && res.status < 300) return res.body as SuccessOf<T>;
  throw SvcApiError.fromResponse(res.status, res.body, res.headers ?? null);
}
