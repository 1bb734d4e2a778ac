import { humanOf, statusOf, type ReasonCode } from '@svc/contract';

/** The one error type services throw; status and default text come from the registry. */
export class ApiError extends Error {
  readonly status: number;
  readonly codes: ReasonCode[];
  readonly human: string;
  readonly headers: Record<string, string>;
  /** Extra top-level keys for the few bodies the interface widens (publish 422, settle). */
  readonly extra: Record<string, unknown>;

  constructor(
    code: ReasonCode | ReasonCode[],
    human?: string,
    opts: { status?: number; headers?: Record<string, string>; extra?: Record<string, unknown> } = {},
  ) {
    const codes = Array.isArray(code) ? code : [code];
    const text = human ?? humanOf(codes[0]!);
    super(text);
    this.codes = codes;
    this.status = opts.status ?? statusOf(codes[0]!);
    this.human = text;
    this.headers = opts.headers ?? {};
    this.extra = opts.extra ?? {};
  }

  body(): Record<string, unknown> {
    return { ...this.extra, reason_codes: this.codes, error_human: this.human };
  }
}

export const notFound = (what = 'resource') => new ApiError('NOT_FOUND', `No such ${what}.`);
