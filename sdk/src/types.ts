import type { AppRoute, ClientInferRequest, ClientInferResponses, SuccessfulHttpStatusCode } from '@ts-rest/core';

export { unwrap } from './errors.js';

/** The 2xx members of a route's response union, as the ts-rest client types them. */
export type SuccessResponse<R extends AppRoute> = Extract<ClientInferResponses<R>, { status: SuccessfulHttpStatusCode }>;
/** The body of a route's success response(s), inferred from the contract. */
export type SuccessBody<R extends AppRoute> = SuccessResponse<R>['body'];
/** A route's request body (the Zod input type), inferred from the contract. */
export type RouteBody<R extends AppRoute> = ClientInferRequest<R> extends { body: infer B } ? B : never;
/** A route's query parameters (the Zod input type), inferred from the contract. */
export type RouteQuery<R extends AppRoute> = ClientInferRequest<R> extends { query: infer Q } ? Q : never;
