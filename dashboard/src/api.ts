import { initClient, tsRestFetchApi } from '@ts-rest/core';
import { contract, type Mode } from '@svc/contract';
import { SvcApiError, SvcConnectionError, unwrap } from '@svc/sdk/errors';

/**
 * The dashboard's only way to the server: a ts-rest client typed by the same contract as the
 * server and the SDKs. It authenticates with the HTTP-only session cookie (same origin) and
 * selects the mode with the Svc-Mode header; the browser's Origin header satisfies the
 * server's CSRF check on writes. `projectId` (the Svc-Project header) selects one of the
 * member's projects; without it the server answers for their first. A server that cannot be
 * reached throws the SDK's SvcConnectionError.
 */
export function apiClient(mode: Mode, projectId?: string | null) {
  return initClient(contract, {
    baseUrl: '',
    baseHeaders: { 'svc-mode': mode, ...(projectId ? { 'svc-project': projectId } : {}) },
    credentials: 'same-origin',
    validateResponse: false,
    throwOnUnknownStatus: false,
    api: async (args) => {
      try {
        return await tsRestFetchApi(args);
      } catch (err) {
        throw new SvcConnectionError('The server could not be reached. Check your connection and try again.', { url: args.path, method: args.method, attempts: 1, timedOut: false, cause: err });
      }
    },
  });
}
export type Api = ReturnType<typeof apiClient>;

type Answer = { status: number; body: unknown; headers?: Headers };

/** Listeners told when the session cookie is missing or expired (the app shows sign-in). */
const unauthenticated = new Set<() => void>();
export function onUnauthenticated(fn: () => void): () => void {
  unauthenticated.add(fn);
  return () => unauthenticated.delete(fn);
}

/**
 * Resolves a call's 2xx body; anything else throws the SDK's typed error as the SDK's own
 * clients do (`unwrap`: SvcApiError, its subclass by status). A 401 also tells the app to sign in.
 */
export async function ok<R extends Answer>(call: Promise<R>) {
  const res = await call;
  if (res.status === 401) for (const fn of unauthenticated) fn();
  return unwrap(res);
}

/** The server's findings, one per part of its `error_human` ("a.b: must …; c: must …"). */
const findingsOf = (err: SvcApiError) => err.errorHuman.replace(/\.$/, '').split('; ');

/**
 * The server's message for one body field ("body.price.amount: must be …" or
 * "receiving.x402.address: must be …"), without the path, to show beside that field.
 */
export function fieldMessage(err: unknown, field: string): string | undefined {
  if (!(err instanceof SvcApiError)) return undefined;
  for (const text of findingsOf(err)) {
    const path = text.slice(0, text.indexOf(':')).replace(/^body\./, '');
    if (text.includes(':') && (path === field || path.startsWith(`${field}.`))) return `${text.slice(text.indexOf(':') + 1).trim().replace(/^./, (c) => c.toUpperCase())}.`;
  }
  return undefined;
}

/** The error, unless every finding in it is shown beside one of `fields` (then the form shows nothing above them). */
export const unplaced = (err: unknown, fields: string[]) => (err && !fields.some((f) => fieldMessage(err, f)) ? err : null);

/** Field paths a merchant sees, in words ("receiving.x402.address" -> "Receiving address"); other paths read as their last part. */
const FIELD_WORDS: Record<string, string> = {
  'receiving.x402.address': 'Receiving address',
  'receiving.x402.chain': 'Chain',
  'receiving.x402.asset': 'Asset',
  'receiving.mock.account': 'Mock account',
  'price.amount': 'Price',
  'price.currency': 'Currency',
};
const fieldWords = (path: string) => {
  const p = path.replace(/^(body|query)\./, '');
  return FIELD_WORDS[p] ?? (p.split('.').at(-1) ?? p).replaceAll('_', ' ').replace(/^./, (c) => c.toUpperCase());
};

/** The server's text with each leading field path ("receiving.x402.address: …") in words ("Receiving address: …"). */
export function inWords(human: string): string {
  return human.replace(/(^|; )((?:body\.|query\.)?[a-z][\w]*(?:\.[\w]+)+): /g, (_m, lead: string, path: string) => `${lead}${fieldWords(path)}: `);
}

/** A human line for any error thrown by `ok` (or anything else): the server's text and its codes. */
export function errorText(err: unknown): string {
  if (err instanceof SvcApiError) {
    return err.reasonCodes.length ? `${inWords(err.errorHuman)} (${err.reasonCodes.join(', ')})` : `The server answered ${err.status}. (HTTP_${err.status})`;
  }
  if (err instanceof SvcConnectionError) return `${err.message} (NETWORK_ERROR)`;
  return err instanceof Error ? err.message : String(err);
}
