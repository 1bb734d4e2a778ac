import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorShape, TestApp } from './helpers/harness.js';
import { checkResponseAgainstOpenApi } from './helpers/openapi-responses.js';

let app: TestApp;
let port: number;

beforeAll(async () => {
  app = await TestApp.start();
  port = Number(new URL(app.baseUrl).port);
});
afterAll(async () => app?.stop());

type Raw = { request: { method: string; target: string }; status: number; headers: Record<string, string>; body: unknown; text: string };

/** Writes raw bytes on a fresh TCP connection (optionally half-closing it) and reads until the server closes. */
function raw(chunks: string[], opts: { halfClose?: boolean } = {}): Promise<Raw> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let data = '';
    socket.setEncoding('utf8');
    socket.on('data', (d) => (data += d));
    socket.on('error', reject);
    socket.setTimeout(10_000, () => {
      socket.destroy();
      reject(new Error(`no answer; got ${JSON.stringify(data)}`));
    });
    socket.on('close', () => {
      const [head, ...rest] = data.split('\r\n\r\n');
      const lines = (head ?? '').split('\r\n');
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(lines[0] ?? '')?.[1] ?? 0);
      const headers: Record<string, string> = {};
      for (const l of lines.slice(1)) {
        const i = l.indexOf(':');
        if (i > 0) headers[l.slice(0, i).toLowerCase()] = l.slice(i + 1).trim();
      }
      const text = rest.join('\r\n\r\n');
      let body: unknown;
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
      const [method = '', target = ''] = (chunks.join('').split('\r\n')[0] ?? '').split(' ');
      resolve({ request: { method, target }, status, headers, body, text });
    });
    socket.on('connect', () => {
      for (const c of chunks) socket.write(c);
      if (opts.halfClose) socket.end();
    });
  });
}

function expectJsonError(r: Raw, status: number, code: string) {
  expect(r.status, r.text).toBe(status);
  expect(r.headers['content-type']).toMatch(/^application\/json/);
  expect(Number(r.headers['content-length'])).toBe(Buffer.byteLength(r.text));
  expectErrorShape(r.body);
  expect(r.body.reason_codes).toEqual([code]);
  // the one error body of the document, its code registered with this status
  checkResponseAgainstOpenApi(r.request.method, r.request.target, r.status, r.headers['content-type'] ?? null, r.text);
}

describe('hardening: transport-level errors carry the error shape (issue 9.7)', () => {
  it('GIVEN a malformed request line THEN 400 BAD_REQUEST as JSON', async () => {
    expectJsonError(await raw(['GARBAGE\r\n\r\n']), 400, 'BAD_REQUEST');
    expectJsonError(await raw(['GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n']), 400, 'BAD_REQUEST');
  });

  it('GIVEN bad chunked encoding THEN 400 BAD_REQUEST as JSON', async () => {
    const r = await raw(['POST /v1/merchants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n']);
    expectJsonError(r, 400, 'BAD_REQUEST');
  });

  it('GIVEN both Content-Length and Transfer-Encoding THEN 400 BAD_REQUEST as JSON', async () => {
    const r = await raw(['POST /v1/merchants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n']);
    expectJsonError(r, 400, 'BAD_REQUEST');
  });

  it('GIVEN a body cut short (Content-Length 100, 5 bytes, then end of stream) THEN 400 BAD_REQUEST as JSON', async () => {
    const r = await raw(['POST /v1/merchants HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"a":'], { halfClose: true });
    expectJsonError(r, 400, 'BAD_REQUEST');
  });

  it('GIVEN headers over 16 KB THEN 431 REQUEST_HEADERS_TOO_LARGE as JSON', async () => {
    const r = await raw([`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`]);
    expectJsonError(r, 431, 'REQUEST_HEADERS_TOO_LARGE');
  });

  it('GIVEN Expect: bogus THEN 417 EXPECTATION_FAILED as JSON; Expect: 100-continue still works', async () => {
    expectJsonError(await raw(['GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: bogus\r\nConnection: close\r\n\r\n']), 417, 'EXPECTATION_FAILED');
    const ok = await raw(['GET /healthz HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n']);
    expect(ok.text).toContain('200 OK');
  });

  it('GIVEN an HTTP/1.1 request without Host THEN 400 BAD_REQUEST as JSON naming the header; HTTP/1.0 needs none', async () => {
    const r = await raw(['GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n']);
    expectJsonError(r, 400, 'BAD_REQUEST');
    expect((r.body as { error_human: string }).error_human).toMatch(/Host header/);
    expect(r.headers['request-id']).toMatch(/^req_/);
    const old = await raw(['GET /healthz HTTP/1.0\r\n\r\n']);
    expect(old.status, old.text).toBe(200);
  });

  it('GIVEN CONNECT THEN 405 METHOD_NOT_ALLOWED as JSON with Allow, no tunnel, and the server keeps serving', async () => {
    const r = await raw(['CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n']);
    expectJsonError(r, 405, 'METHOD_NOT_ALLOWED');
    expect(r.headers.allow).toBe('GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS');
    // a client that resets the connection at once costs nothing either
    await raw(['CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: 127.0.0.1:22\r\n\r\n'], { halfClose: true });
    expect((await app.request('GET', '/healthz')).status).toBe(200);
  });
});
