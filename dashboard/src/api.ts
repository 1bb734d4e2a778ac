import { initClient } from '@ts-rest/core';
import { contract, type Mode } from '@svc/contract';

/**
 * The dashboard's only way to the server: a ts-rest client typed by the same contract as the
 * server and the SDKs. It authenticates with the HTTP-only session cookie (same origin) and
 * selects the mode with the Svc-Mode header; the browser's Origin header satisfies the
 * server's CSRF check on writes.
 */
export function apiClient(mode: Mode) {
  return initClient(contract, {
    baseUrl: '',
    baseHeaders: { 'svc-mode': mode },
    credentials: 'same-origin',
    validateResponse: false,
    throwOnUnknownStatus: false,
  });
}
export type Api = ReturnType<typeof apiClient>;

/** A non-2xx answer, in the API's `{reason_codes, error_human}` shape. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly reasonCodes: string[],
    message: string,
    readonly body: unknown,
  ) {
    super(message);
  }
  /** The server's message for one body field ("body.price.amount: must be …"), to show beside that field. */
  fieldMessage(field: string): string | undefined {
    const prefix = `body.${field}`;
    if (!this.message.startsWith(`${prefix}:`) && !this.message.startsWith(`${prefix}.`)) return undefined;
    return this.message.slice(this.message.indexOf(':') + 1).trim();
  }
}

type Answer = { status: number; body: unknown };
type Success<R> = R extends { status: 200 | 201 | 202 | 204; body: infer B } ? B : never;

/** Listeners told when the session cookie is missing or expired (the app shows sign-in). */
const unauthenticated = new Set<() => void>();
export function onUnauthenticated(fn: () => void): () => void {
  unauthenticated.add(fn);
  return () => unauthenticated.delete(fn);
}

/** Resolves a call's 2xx body; anything else throws ApiError (401 also tells the app to sign in). */
export async function ok<R extends Answer>(call: Promise<R>): Promise<Success<R>> {
  let res: R;
  try {
    res = await call;
  } catch (err) {
    throw new ApiError(0, ['NETWORK_ERROR'], 'The server could not be reached. Check your connection and try again.', err);
  }
  if (res.status >= 200 && res.status < 300) return res.body as Success<R>;
  const body = (res.body ?? {}) as { reason_codes?: unknown; error_human?: unknown };
  const codes = Array.isArray(body.reason_codes) ? body.reason_codes.map(String) : [`HTTP_${res.status}`];
  const human = typeof body.error_human === 'string' ? body.error_human : `The server answered ${res.status}.`;
  if (res.status === 401) for (const fn of unauthenticated) fn();
  throw new ApiError(res.status, codes, human, res.body);
}

/** A human line for any error thrown by `ok` (or anything else). */
export function errorText(err: unknown): string {
  if (err instanceof ApiError) return `${err.message} (${err.reasonCodes.join(', ')})`;
  return err instanceof Error ? err.message : String(err);
}
