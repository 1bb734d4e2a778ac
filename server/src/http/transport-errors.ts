import { createServer, STATUS_CODES, type IncomingMessage, type RequestListener, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { humanOf, statusOf, type ReasonCode } from '@svc/contract';

/** What Node's HTTP parser reports (llhttp `HPE_*` codes and Node's own) as one reason code and line. */
function describe(code: string | undefined): [ReasonCode, string] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return ['REQUEST_HEADERS_TOO_LARGE', humanOf('REQUEST_HEADERS_TOO_LARGE')];
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return ['REQUEST_TIMEOUT', humanOf('REQUEST_TIMEOUT')];
    case 'HPE_INVALID_METHOD':
    case 'HPE_INVALID_URL':
    case 'HPE_INVALID_VERSION':
    case 'HPE_INVALID_CONSTANT':
      return ['BAD_REQUEST', 'The request line is not valid HTTP/1.1.'];
    case 'HPE_INVALID_CHUNK_SIZE':
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
    case 'HPE_INVALID_TRANSFER_ENCODING':
      return ['BAD_REQUEST', 'The chunked request body is malformed.'];
    case 'HPE_UNEXPECTED_CONTENT_LENGTH':
    case 'HPE_INVALID_CONTENT_LENGTH':
      return ['BAD_REQUEST', 'Content-Length is invalid or conflicts with Transfer-Encoding.'];
    case 'HPE_INVALID_EOF_STATE':
      return ['BAD_REQUEST', 'The request ended before its body was complete.'];
    default:
      return ['BAD_REQUEST', 'The request is not valid HTTP/1.1.'];
  }
}

/** A complete HTTP/1.1 response carrying the one error body, closing the connection. */
export function rawErrorResponse(code: ReasonCode, human: string = humanOf(code), headers: Record<string, string> = {}): string {
  const status = statusOf(code);
  const body = JSON.stringify({ reason_codes: [code], error_human: human });
  return [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}`,
    'Content-Type: application/json; charset=utf-8',
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
    '',
    body,
  ].join('\r\n');
}

/**
 * The HTTP server of an app (main and the test harness listen with it; the harness adds the app once it has booted), with every answer Node
 * would give by itself in the error shape. Node's own Host check (`requireHostHeader`) answers
 * an empty 400 before the app; it is off, and the app refuses a Host-less HTTP/1.1 request
 * (`hostRequired` in request-target-guard.ts), so that answer has the body and the Request-Id.
 */
export function createHttpServer(app?: RequestListener): Server {
  const server = createServer({ requireHostHeader: false }, app);
  installTransportErrorHandlers(server);
  return server;
}

/**
 * Errors Node's HTTP server answers before any request reaches Express (a malformed request
 * line, bad chunking, conflicting Content-Length and Transfer-Encoding, a body cut short,
 * headers over the 16 KB limit, an Expect other than 100-continue) get the
 * `{reason_codes, error_human}` body like every other error, and so does `CONNECT`, which
 * Node hands to a `connect` listener instead of the app (without one it drops the socket).
 */
function installTransportErrorHandlers(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    // A reset connection, or one whose response has started, cannot take another response.
    if (err.code === 'ECONNRESET' || !socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const [code, human] = describe(err.code);
    socket.end(rawErrorResponse(code, human));
  });
  // A proxy's method: this is an origin server, so the tunnel is refused, not opened.
  server.on('connect', (_req: IncomingMessage, socket: Duplex) => {
    // Node took its own error listener off this socket: a reset must not become an uncaught error.
    socket.on('error', () => socket.destroy());
    socket.end(rawErrorResponse('METHOD_NOT_ALLOWED', humanOf('METHOD_NOT_ALLOWED'), { Allow: 'GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS' }));
  });
  server.on('checkExpectation', (_req: IncomingMessage, res: ServerResponse) => {
    const body = JSON.stringify({ reason_codes: ['EXPECTATION_FAILED'], error_human: humanOf('EXPECTATION_FAILED') });
    res.writeHead(statusOf('EXPECTATION_FAILED'), {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
    });
    res.end(body);
  });
}
