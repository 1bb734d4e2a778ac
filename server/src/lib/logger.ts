import pino, { type Logger } from 'pino';

/** JSON logs on stderr (stdout stays clean for CLI output); secrets redacted by path. */
export function createLogger(level: string): Logger {
  return pino(
    {
      level,
      base: { service: 'svc-checkout' },
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers["x-svc-api-key"]',
          'headers.authorization',
          'secret',
          '*.secret',
          'api_key',
          '*.api_key',
          'SVC_RELAYER_PRIVATE_KEYS',
          '*.SVC_RELAYER_PRIVATE_KEYS',
          'SVC_FACILITATOR_AUTH_HEADER',
          '*.SVC_FACILITATOR_AUTH_HEADER',
        ],
        censor: '[redacted]',
      },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    pino.destination({ fd: 2, sync: false }),
  );
}
export type { Logger };
