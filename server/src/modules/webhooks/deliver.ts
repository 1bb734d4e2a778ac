import http from 'node:http';
import https from 'node:https';
import { guardedLookup, refusedLiteral } from '../../lib/ssrf.js';

export const WEBHOOK_USER_AGENT = 'Svc-Checkout-Webhooks/1';
/** Section 8: a delivery succeeds on a 2xx within 10 s. */
export const WEBHOOK_TIMEOUT_MS = 10_000;
/** Response bodies are drained and discarded; a receiver that streams more than this is cut off. */
const MAX_RESPONSE_BYTES = 64 * 1024;

export type AttemptOutcome = {
  ok: boolean;
  responseStatus: number | null;
  durationMs: number;
  error: string | null;
};

export type WebhookRequest = {
  url: string;
  body: string;
  headers: Record<string, string>;
  /** Live endpoints connect only to public addresses, checked on every resolved address. */
  restrictAddresses: boolean;
  timeoutMs: number;
  signal?: AbortSignal;
};

export type Agents = { http: http.Agent; https: https.Agent };

export function createAgents(): Agents {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 32 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 32 }),
  };
}

function describeError(err: unknown): string {
  if (err instanceof Error) {
    const code = (err as NodeJS.ErrnoException).code;
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
  }
  return String(err);
}

/**
 * One HTTP POST of a webhook. Never throws: the outcome carries the status, the duration
 * and an error text. Redirects are not followed (a 3xx is a failure).
 */
export function postWebhook(req: WebhookRequest, agents: Agents): Promise<AttemptOutcome> {
  const started = process.hrtime.bigint();
  const elapsed = () => Math.round(Number(process.hrtime.bigint() - started) / 1e6);
  return new Promise<AttemptOutcome>((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let onAbort: (() => void) | undefined;
    const finish = (o: Omit<AttemptOutcome, 'durationMs'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (onAbort) req.signal?.removeEventListener('abort', onAbort);
      resolve({ ...o, durationMs: elapsed() });
    };
    let url: URL;
    try {
      url = new URL(req.url);
    } catch {
      return finish({ ok: false, responseStatus: null, error: 'the endpoint URL is invalid' });
    }
    const refused = req.restrictAddresses ? refusedLiteral(url) : null;
    if (refused) return finish({ ok: false, responseStatus: null, error: refused });
    const ac = new AbortController();
    timer = setTimeout(() => ac.abort(new Error(`timed out after ${req.timeoutMs} ms`)), req.timeoutMs);
    onAbort = () => ac.abort(new Error('the worker stopped during the attempt'));
    if (req.signal?.aborted) onAbort();
    req.signal?.addEventListener('abort', onAbort);

    const isHttps = url.protocol === 'https:';
    const request = (isHttps ? https : http).request(
      url,
      {
        method: 'POST',
        headers: { ...req.headers, 'Content-Length': String(Buffer.byteLength(req.body)) },
        agent: isHttps ? agents.https : agents.http,
        signal: ac.signal,
        ...(req.restrictAddresses ? { lookup: guardedLookup as unknown as typeof import('node:dns').lookup } : {}),
      },
      (res) => {
        let received = 0;
        res.on('data', (chunk: Buffer) => {
          received += chunk.length;
          if (received > MAX_RESPONSE_BYTES) res.destroy();
        });
        const done = () => {
          const status = res.statusCode ?? 0;
          const ok = status >= 200 && status < 300;
          finish({ ok, responseStatus: status, error: ok ? null : `the receiver answered HTTP ${status}` });
        };
        res.on('end', done);
        // A receiver that answered but cut the body short still answered: judge by the status.
        res.on('close', done);
        res.on('error', () => undefined);
      },
    );
    request.on('error', (err) => {
      const reason = ac.signal.aborted ? ac.signal.reason : err;
      finish({ ok: false, responseStatus: null, error: describeError(reason) });
    });
    request.end(req.body);
  });
}
