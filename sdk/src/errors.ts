import type { Finding, ReasonCode } from '@svc/contract';
import type { SuccessfulHttpStatusCode } from '@ts-rest/core';

/** A registered reason code, or a code this SDK version does not know yet. */
export type ReasonCodeString = ReasonCode | (string & {});

/** Base of every error this SDK throws; `instanceof SvcError` catches them all. */
export class SvcError extends Error {
  override readonly name: string = 'SvcError';
}

type ErrorInit = {
  status: number;
  reasonCodes: ReasonCodeString[];
  errorHuman: string;
  requestId: string | null;
  body: unknown;
  headers: Headers | null;
};

/**
 * An error status from the API. `reasonCodes` is the stable machine vocabulary (the first
 * code decides the status); `errorHuman` is one line for people and is never to be parsed.
 */
export class SvcApiError extends SvcError {
  override readonly name: string = 'SvcApiError';
  readonly status: number;
  readonly reasonCodes: ReasonCodeString[];
  readonly errorHuman: string;
  /** The `Request-Id` response header: quote it when asking for support. */
  readonly requestId: string | null;
  /** The parsed response body as received. */
  readonly body: unknown;
  readonly headers: Headers | null;

  constructor(init: ErrorInit) {
    super(`${init.status} ${init.reasonCodes.join(', ') || 'ERROR'}: ${init.errorHuman}${init.requestId ? ` (request ${init.requestId})` : ''}`);
    this.status = init.status;
    this.reasonCodes = init.reasonCodes;
    this.errorHuman = init.errorHuman;
    this.requestId = init.requestId;
    this.body = init.body;
    this.headers = init.headers;
  }

  /** The primary reason code (the one that decided the status). */
  get code(): ReasonCodeString | undefined {
    return this.reasonCodes[0];
  }

  /** Builds the subclass for the status from a response. */
  static fromResponse(status: number, body: unknown, headers: Headers | null): SvcApiError {
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const reasonCodes = Array.isArray(b.reason_codes) ? b.reason_codes.filter((c): c is string => typeof c === 'string') : [];
    const errorHuman =
      typeof b.error_human === 'string' ? b.error_human : typeof body === 'string' && body.length > 0 ? body.slice(0, 300) : `HTTP ${status}`;
    const init: ErrorInit = { status, reasonCodes, errorHuman, requestId: headers?.get('request-id') ?? null, body, headers };
    if (status === 400 || status === 422) return new SvcValidationError(init);
    if (status === 401 || status === 403) return new SvcAuthError(init);
    if (status === 404) return new SvcNotFoundError(init);
    if (status === 409) return new SvcConflictError(init);
    if (status === 429) return new SvcRateLimitError(init);
    if (status >= 500) return new SvcServerError(init);
    return new SvcApiError(init);
  }
}

/** 400 and 422: the request failed validation, or publish refused the configuration. */
export class SvcValidationError extends SvcApiError {
  override readonly name: string = 'SvcValidationError';
  /** Publish's findings when it answers 422 CONFIG_INVALID; empty otherwise. */
  readonly findings: Finding[];
  constructor(init: ErrorInit) {
    super(init);
    const f = (init.body as { findings?: unknown } | null)?.findings;
    this.findings = Array.isArray(f)
      ? f.filter((x): x is Finding => typeof x === 'object' && x !== null && typeof x.code === 'string' && typeof x.human === 'string')
      : [];
  }
}

/** 401 (no, unknown or revoked key) and 403 (missing scope, wrong mode). */
export class SvcAuthError extends SvcApiError {
  override readonly name: string = 'SvcAuthError';
}

/** 404: no such resource, or one from another project or mode. */
export class SvcNotFoundError extends SvcApiError {
  override readonly name: string = 'SvcNotFoundError';
}

/** 409: a uniqueness conflict, an Idempotency-Key reused with another request, or a state conflict. */
export class SvcConflictError extends SvcApiError {
  override readonly name: string = 'SvcConflictError';
}

/** 429 after the retries ran out; `retryAfter` is the server's Retry-After in seconds, when sent. */
export class SvcRateLimitError extends SvcApiError {
  override readonly name: string = 'SvcRateLimitError';
  readonly retryAfter: number | null;
  constructor(init: ErrorInit) {
    super(init);
    const ms = init.headers ? parseRetryAfterMs(init.headers.get('retry-after')) : null;
    this.retryAfter = ms === null ? null : Math.ceil(ms / 1000);
  }
}

/** 5xx after the retries ran out. */
export class SvcServerError extends SvcApiError {
  override readonly name: string = 'SvcServerError';
}

/** The request never produced a response: connection refused or reset, DNS failure, or timeout. */
export class SvcConnectionError extends SvcError {
  override readonly name: string = 'SvcConnectionError';
  constructor(
    message: string,
    readonly details: { url: string; method: string; attempts: number; timedOut: boolean; cause: unknown },
  ) {
    super(message, { cause: details.cause });
  }
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; null when absent or unreadable. */
export function parseRetryAfterMs(value: string | null | undefined, now: number = Date.now()): number | null {
  if (value === null || value === undefined) return null;
  const v = value.trim();
  if (/^\d+(\.\d+)?$/.test(v)) return Math.round(Number(v) * 1000);
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.max(0, at - now);
}

type AnyResponse = { status: number; body: unknown; headers?: Headers };
type SuccessOf<T extends AnyResponse> = Extract<T, { status: SuccessfulHttpStatusCode }>['body'];

/**
 * Returns the success body of a ts-rest client response, or throws the typed SvcApiError: the
 * one way from a response to an error, for the SDK's clients and the dashboard alike.
 */
export function unwrap<T extends AnyResponse>(res: T): SuccessOf<T> {
  if (res.status >= 200 && res.status < 300) return res.body as SuccessOf<T>;
  throw SvcApiError.fromResponse(res.status, res.body, res.headers ?? null);
}
