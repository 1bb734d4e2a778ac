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

export function sendError(res: Response, status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  if (res.headersSent) return;
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  res.status(status).json(body);
}

export function sendCode(res: Response, code: ReasonCode, human?: string) {
  sendError(res, statusOf(code), { reason_codes: [code], error_human: human ?? humanOf(code) });
}

function describeIssue(where: string, issue: ZodIssue): string {
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
  if (err instanceof UniqueConstraintViolationException) {
    const name = (err as unknown as { constraint?: string }).constraint ?? '';
    const hit = Object.entries(UNIQUE_CODES).find(([k]) => name === k || String(err.message).includes(k));
    if (hit) return sendCode(res, hit[1]);
  }
  req.ctx?.log.error({ err }, 'unhandled error');
  sendCode(res, 'INTERNAL_ERROR');
};
