import type { ApiFetcherArgs } from '@ts-rest/core';
import { parseRetryAfterMs, SvcApiError, SvcConnectionError } from './errors.js';

export const SDK_VERSION = '0.1.0';
export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_TIMEOUT_MS = 30_000;
const INITIAL_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8_000;
/** A Retry-After longer than this is not waited out: the error is raised with `retryAfter`. */
const MAX_RETRY_AFTER_MS = 60_000;

export type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

/** Per-call controls, accepted by every SDK method as its last argument. */
export type RequestOptions = {
  /**
   * Sent as `Idempotency-Key` on POSTs. When omitted, one is generated per call and reused
   * by every retry of that call, so a retried create never creates twice.
   */
  idempotencyKey?: string | undefined;
  /** Aborts the call (and its retries); the AbortError is rethrown as is. */
  signal?: AbortSignal | undefined;
  /** Per-attempt timeout; overrides the client's `timeoutMs`. */
  timeoutMs?: number | undefined;
  /** Overrides the client's `maxRetries` for this call. */
  maxRetries?: number | undefined;
};

export type TransportConfig = {
  fetch: FetchLike;
  maxRetries: number;
  timeoutMs: number;
  /** Headers sent on every request (Authorization for the merchant client). */
  headers: Record<string, string>;
  /** Send an Idempotency-Key on every POST (management API). */
  idempotentPosts: boolean;
};

export type TransportResponse = { status: number; body: unknown; headers: Headers };

/** Statuses worth another attempt: rate limiting and server errors. */
export function isRetryableStatus(status: number, body: unknown): boolean {
  if (status === 429 || status >= 500) return true;
  // A retry that raced the first attempt of the same key: the first one is still running.
  const codes = (body as { reason_codes?: unknown } | null)?.reason_codes;
  return status === 409 && Array.isArray(codes) && codes[0] === 'IDEMPOTENCY_KEY_IN_PROGRESS';
}

/**
 * How long to wait before retry number `retry` (0 for the first retry): the server's
 * Retry-After when it sent one, else exponential backoff with "equal jitter" (half fixed,
 * half random) so that many clients do not retry in lockstep. null: do not retry.
 */
export function computeRetryDelayMs(retry: number, retryAfter: string | null, random: () => number = Math.random): number | null {
  const hinted = parseRetryAfterMs(retryAfter);
  if (hinted !== null) return hinted <= MAX_RETRY_AFTER_MS ? hinted : null;
  const base = Math.min(MAX_BACKOFF_MS, INITIAL_BACKOFF_MS * 2 ** retry);
  return Math.round(base / 2 + random() * (base / 2));
}

export function newIdempotencyKey(): string {
  return `sdk_${globalThis.crypto.randomUUID()}`;
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

async function readBody(res: Response): Promise<unknown> {
  const text = await res.text();
  if (text.length === 0) return undefined;
  const type = res.headers.get('content-type') ?? '';
  if (type.includes('json')) {
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw SvcApiError.fromResponse(res.status, `The response is not valid JSON: ${text.slice(0, 200)}`, res.headers);
    }
  }
  return text;
}

type SendArgs = {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: string | undefined;
  options: RequestOptions | undefined;
};

/**
 * One logical call: up to 1 + maxRetries attempts. Connection failures, timeouts, 429 and
 * 5xx are retried (honouring Retry-After); a POST carries the same Idempotency-Key on every
 * attempt. Error statuses are returned, not thrown: the caller maps them to typed errors.
 */
export async function send(config: TransportConfig, args: SendArgs): Promise<TransportResponse> {
  const opts = args.options ?? {};
  const maxRetries = Math.max(0, opts.maxRetries ?? config.maxRetries);
  const timeoutMs = opts.timeoutMs ?? config.timeoutMs;
  const headers: Record<string, string> = {
    accept: 'application/json',
    'user-agent': `svc-sdk-node/${SDK_VERSION}`,
    ...config.headers,
    ...args.headers,
  };
  if ((args.method === 'POST' || args.method === 'PUT') && (config.idempotentPosts || opts.idempotencyKey)) {
    headers['idempotency-key'] = opts.idempotencyKey ?? headers['idempotency-key'] ?? newIdempotencyKey();
  }
  for (let attempt = 0; ; attempt++) {
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timeout]) : timeout;
    let res: Response;
    try {
      res = await config.fetch(args.url, { method: args.method, headers, body: args.body, signal });
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      const timedOut = timeout.aborted;
      if (attempt < maxRetries) {
        await sleep(computeRetryDelayMs(attempt, null) ?? 0, opts.signal);
        continue;
      }
      const why = timedOut ? `timed out after ${timeoutMs} ms` : err instanceof Error ? (describeCause(err) ?? err.message) : String(err);
      throw new SvcConnectionError(`${args.method} ${args.url} failed after ${attempt + 1} attempt(s): ${why}`, {
        url: args.url,
        method: args.method,
        attempts: attempt + 1,
        timedOut,
        cause: err,
      });
    }
    let body: unknown;
    try {
      body = await readBody(res);
    } catch (err) {
      if (err instanceof SvcApiError) throw err;
      // The connection broke while the body was streaming: same as a connection failure.
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (attempt < maxRetries) {
        await sleep(computeRetryDelayMs(attempt, null) ?? 0, opts.signal);
        continue;
      }
      throw new SvcConnectionError(`${args.method} ${args.url}: the response body could not be read`, {
        url: args.url,
        method: args.method,
        attempts: attempt + 1,
        timedOut: timeout.aborted,
        cause: err,
      });
    }
    if (attempt < maxRetries && isRetryableStatus(res.status, body)) {
      const delay = computeRetryDelayMs(attempt, res.headers.get('retry-after'));
      if (delay !== null) {
        await sleep(delay, opts.signal);
        continue;
      }
    }
    return { status: res.status, body, headers: res.headers };
  }
}

function describeCause(err: Error): string | undefined {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } }).cause;
  if (!cause) return undefined;
  const code = typeof cause.code === 'string' ? cause.code : undefined;
  const message = typeof cause.message === 'string' ? cause.message : undefined;
  return [err.message, code ?? message].filter(Boolean).join(': ');
}

/** Extra argument every contract call accepts through the ts-rest client. */
export type CallExtras = { svc?: RequestOptions };

/** The ts-rest `api` fetcher: builds nothing itself, hands the prepared request to `send`. */
export function tsRestFetcher(config: TransportConfig, rewriteUrl: (url: string) => string = (u) => u) {
  return async (args: ApiFetcherArgs & CallExtras): Promise<TransportResponse> => {
    const body = typeof args.body === 'string' ? args.body : args.body === null || args.body === undefined ? undefined : String(args.body);
    return send(config, { url: rewriteUrl(args.path), method: args.method, headers: args.headers, body, options: args.svc });
  };
}

/** A path parameter, percent-encoded; an empty one would silently address another route. */
export function pathParam(name: string, value: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new TypeError(`${name} must be a non-empty string`);
  return encodeURIComponent(value);
}
