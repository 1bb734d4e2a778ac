import http from 'node:http';
import https from 'node:https';
import { checkPeer, pinnedLookup, refusalText, resolveTarget, untilBudget, type OutboundRules, type Resolver, type Target } from '../../lib/ssrf.js';

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
  /** Which addresses the attempt may reach (lib/ssrf.ts `outboundRules`: the endpoint's mode and the configuration). */
  rules: OutboundRules;
  /** The attempt's timeout, and the fixed time a failed attempt to a non-public address takes. */
  timeoutMs: number;
  signal?: AbortSignal;
  /** Tests inject a resolver; the system one otherwise. */
  resolve?: Resolver;
};

export type Agents = { http: http.Agent; https: https.Agent };

export function createAgents(): Agents {
  return {
    http: new http.Agent({ keepAlive: true, maxSockets: 32 }),
    https: new https.Agent({ keepAlive: true, maxSockets: 32 }),
  };
}

/**
 * The only failure text of an attempt that reached (or tried to reach) a loopback or private
 * address: no status, no connection error, and the full budget as its duration, so the record
 * cannot tell a closed port from an open one (docs/webhooks.md "What an attempt records").
 */
export const NON_PUBLIC_FAILURE = 'failed: no 2xx answer from a non-public address (details are not recorded for loopback or private receivers)';

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
 *
 * The target is resolved and checked against the rules before anything connects (a refusal
 * is recorded at once, without the address); the socket gets exactly the checked addresses,
 * and a reused keep-alive socket is checked again by its peer. A public receiver's failure
 * keeps its detail (HTTP status, connection error); a failure at a loopback or private
 * address answers only when the budget (`timeoutMs`) has passed, with NON_PUBLIC_FAILURE.
 */
export async function postWebhook(req: WebhookRequest, agents: Agents): Promise<AttemptOutcome> {
  const startedAt = performance.now();
  const elapsed = () => Math.round(performance.now() - startedAt);
  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    return { ok: false, responseStatus: null, durationMs: elapsed(), error: 'the endpoint URL is invalid' };
  }
  const target = await resolveTarget(url, req.rules, req.resolve);
  if (!target.ok) return { ok: false, responseStatus: null, durationMs: elapsed(), error: target.why };
  const sent = await send(url, target, req, agents);
  if (sent.ok || !sent.nonPublic) return { ok: sent.ok, responseStatus: sent.responseStatus, durationMs: elapsed(), error: sent.error };
  if (sent.refused) return { ok: false, responseStatus: null, durationMs: elapsed(), error: sent.error };
  await untilBudget(startedAt, req.timeoutMs, req.signal);
  return { ok: false, responseStatus: null, durationMs: req.timeoutMs, error: NON_PUBLIC_FAILURE };
}

type Sent = { ok: boolean; responseStatus: number | null; error: string | null; nonPublic: boolean; refused?: boolean };

function send(url: URL, target: Extract<Target, { ok: true }>, req: WebhookRequest, agents: Agents): Promise<Sent> {
  return new Promise<Sent>((resolve) => {
    let nonPublic = target.nonPublic;
    let settled = false;
    let onAbort: (() => void) | undefined;
    const ac = new AbortController();
    const timer = setTimeout(() => ac.abort(new Error(`timed out after ${req.timeoutMs} ms`)), req.timeoutMs);
    const finish = (o: Omit<Sent, 'nonPublic'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (onAbort) req.signal?.removeEventListener('abort', onAbort);
      resolve({ ...o, nonPublic });
    };
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
        ...(target.addresses ? { lookup: pinnedLookup(target.addresses) } : {}),
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
    // A pooled socket may have been opened for another endpoint, under other rules or an
    // earlier DNS answer: its peer decides, before the body is written to it.
    request.on('socket', (socket) => {
      const check = () => {
        const peer = checkPeer(socket, req.rules);
        if (peer === null) {
          nonPublic = true;
          finish({ ok: false, responseStatus: null, error: refusalText(req.rules), refused: true });
          request.destroy();
        } else if (peer) nonPublic = true;
      };
      if (socket.remoteAddress) check();
      else socket.once('connect', check);
    });
    request.on('error', (err) => {
      const reason = ac.signal.aborted ? ac.signal.reason : err;
      finish({ ok: false, responseStatus: null, error: describeError(reason) });
    });
    request.end(req.body);
  });
}
