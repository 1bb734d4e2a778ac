import type { ErrorRequestHandler, NextFunction, Request, Response } from 'express';
import { UniqueConstraintViolationException } from '@mikro-orm/core';
import type { RequestValidationError } from '@ts-rest/express';
import type { ZodError, ZodIssue } from 'zod';
import { humanOf, statusOf, type ReasonCode } from '@svc/contract';
import { ApiError } from '../lib/errors.js';

/** Unique constraints whose violation is a documented 409, by constraint name. */
const UNIQUE_CODES: Record<string, ReasonCode> = {
  merchants_slug_mode: 'MERCHANT_SLUG_TAKEN',
  catalog_items_merchant_sku: 'PRODUCT_SKU_TAKEN',
};

/** error_human is one line: control and line-separator characters (e.g. echoed from a path) are escaped. */
export function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f\u2028\u2029]/g, (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

export function sendError(res: Response, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  if (res.headersSent) return;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  const out = typeof body.error_human === 'string' ? { ...body, error_human: oneLine(body.error_human) } : body;
  res.status(status).json(out);
}

export function sendCode(res: Response, code: ReasonCode, human?: string) {
  sendError(res, statusOf(code), { reason_codes: [code], error_human: human ?? humanOf(code) });
}

/** For a union (e.g. the settle payment), report the member error that got furthest into the input. */
function deepest(issue: ZodIssue): ZodIssue {
  if (issue.code !== 'invalid_union') return issue;
  const candidates = issue.unionErrors.map((e) => e.issues[0]).filter((i): i is ZodIssue => i !== undefined);
  const best = candidates.sort((a, b) => b.path.length - a.path.length)[0];
  return best ? deepest(best) : issue;
}

/** One Zod issue as `where.path: message` (the deepest member of a union). */
export function describeIssue(where: string, issue: ZodIssue): string {
  issue = deepest(issue);
  const path = [where, ...issue.path].filter((p) => p !== '').join('.');
  if (issue.code === 'unrecognized_keys') return `${path}: unknown field(s) ${issue.keys.join(', ')}`;
  if (issue.code === 'invalid_type' && issue.received === 'undefined') return `${path}: is required`;
  return `${path}: ${issue.message}`;
}

/** ts-rest request validation -> 400 VALIDATION_FAILED naming the field (price.amount -> PRICE_AMOUNT_INVALID). */
export function validationErrorHandler(err: RequestValidationError, _req: Request, res: Response, _next: NextFunction) {
  const parts: Array<[string, ZodError | null]> = [
    ['path', err.pathParams],
    ['query', err.query],
    ['headers', err.headers],
    ['body', err.body],
  ];
  for (const [where, zerr] of parts) {
    const issue = zerr?.issues[0];
    if (!issue) continue;
    const isPrice = where === 'body' && issue.path.length >= 2 && issue.path.at(-1) === 'amount' && issue.path.at(-2) === 'price';
    const code: ReasonCode = isPrice ? 'PRICE_AMOUNT_INVALID' : 'VALIDATION_FAILED';
    const human = isPrice ? `${describeIssue(where, issue)} (${humanOf('PRICE_AMOUNT_INVALID')})` : describeIssue(where, issue);
    return sendError(res, 400, { reason_codes: [code], error_human: human });
  }
  return sendCode(res, 'VALIDATION_FAILED');
}

export function notFoundHandler(_req: Request, res: Response) {
  sendCode(res, 'NOT_FOUND', 'No such route.');
}

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'ENOTFOUND', 'EHOSTUNREACH', 'EAI_AGAIN', 'EPIPE']);

/**
 * The database cannot be reached (refused or dropped connection, server shutting down or
 * refusing connections, connection slots exhausted) or did not answer in time (statement
 * timeout, client query timeout, no connection within the connect / pool-acquire timeout,
 * idle transaction ended by the server, the request's total database time spent): a
 * retryable 503, not a 500.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null;
  const code = typeof e?.code === 'string' ? e.code : '';
  const message = typeof e?.message === 'string' ? e.message : '';
  if (NETWORK_CODES.has(code)) return true;
  // SQLSTATE class 08 connection_exception; 57P01-57P03 shutdown / cannot connect now; 53300 too_many_connections.
  if (/^08[0-9A-Z]{3}$/.test(code) || /^57P0[123]$/.test(code) || code === '53300') return true;
  // 57014 query_canceled (statement_timeout), 55P03 lock_not_available (lock_timeout), 25P03 idle_in_transaction_session_timeout.
  if (code === '57014' || code === '55P03' || code === '25P03') return true;
  // The request's own total wait on the database ran out (db/request-budget.ts).
  if (code === 'SVC_DB_REQUEST_TIMEOUT') return true;
  if (code === '55000' && message.includes('not currently accepting connections')) return true;
  return /^Connection terminated|timeout exceeded when trying to connect/.test(message) || message.includes('Query read timeout');
}

/** The one error mapper: ApiError, body-parser errors, unique violations, and anything else as 500. */
export const errorHandler: ErrorRequestHandler = (err, req, res, _next) => {
  if (err instanceof ApiError) return sendError(res, err.status, err.body(), err.headers);
  const e = err as { type?: string; status?: number; constraint?: string; message?: string };
  if (e?.type === 'entity.parse.failed') return sendCode(res, 'BAD_REQUEST');
  if (e?.type === 'entity.too.large') return sendCode(res, 'PAYLOAD_TOO_LARGE');
  if (e?.type === 'encoding.unsupported' || e?.type === 'charset.unsupported') {
    return sendCode(res, 'BAD_REQUEST', 'Unsupported body encoding or charset.');
  }
  if (e?.type === 'request.aborted') return;
  // The router could not percent-decode a path parameter.
  if (err instanceof URIError && e.status === 400) return sendCode(res, 'BAD_REQUEST', 'The request path is not valid percent-encoding.');
  // Other client errors raised while reading the body (corrupt gzip, a Content-Length
  // mismatch): body-parser raises them through http-errors, which marks them expose.
  const exposed = err as { expose?: boolean };
  if (typeof e?.status === 'number' && e.status >= 400 && e.status < 500 && exposed.expose === true) {
    if (e.status === 413) return sendCode(res, 'PAYLOAD_TOO_LARGE');
    return sendCode(res, 'BAD_REQUEST', `The request could not be read: ${e.message ?? 'malformed request'}.`);
  }
  if (err instanceof UniqueConstraintViolationException) {
    const name = String(Reflect.get(err, 'constraint') ?? ''); // the driver's constraint name, which MikroORM's type does not declare
    const hit = Object.entries(UNIQUE_CODES).find(([k]) => name === k || String(err.message).includes(k));
    if (hit) return sendCode(res, hit[1]);
  }
  if (isDatabaseUnavailable(err)) {
    req.ctx?.log.error({ err: { name: (err as Error).name, message: String((err as Error).message).split('\n')[0] } }, 'database unavailable');
    return sendCode(res, 'DATABASE_UNAVAILABLE');
  }
  // Log the error without driver extras (a failed query carries its SQL and parameters).
  const safe = err instanceof Error ? { name: err.name, message: err.message.split('\n')[0], stack: err.stack?.split('\n').slice(1, 8).join('\n') } : { value: String(err) };
  req.ctx?.log.error({ err: safe, code: e?.constraint }, 'unhandled error');
  sendCode(res, 'INTERNAL_ERROR');
};
