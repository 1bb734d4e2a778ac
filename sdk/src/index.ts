/**
 * @svc/sdk: the merchant client (management API), the agent client (discover, checkout,
 * EIP-712 payment, settle, receipts) and the webhook verifier. Subpaths: `@svc/sdk/merchant`,
 * `@svc/sdk/agent`, `@svc/sdk/webhooks`.
 */
export * from './merchant.js';
export * from './agent.js';
export * from './errors.js';
export { ListIterator, type Page } from './pagination.js';
export type { RequestOptions, FetchLike } from './http.js';
export type { SuccessBody, RouteBody, RouteQuery } from './types.js';
export { unwrap } from './types.js';
export * from './webhooks.js';
