import { z } from 'zod';
import { c, meta } from './common.js';
import { ErrorBody } from './errors.js';

/**
 * The local operator channel: the admin CLI (`npm run svc -- …`) hands its command to the
 * running server when the embedded database is open there (PGlite is single-process). Only
 * from the server's own machine (loopback), with the token the server wrote to
 * `<SVC_DATA_DIR>/operator.json` (mode 0600, readable by the server's user only).
 */
export const operatorContract = c.router({
  cli: {
    method: 'POST',
    path: '/v1/operator/cli',
    body: z.object({ argv: z.array(z.string().max(1000)).min(1).max(50) }).strict(),
    responses: {
      200: z.object({ output: z.string().describe('What the command prints on stdout.') }),
      400: ErrorBody,
      401: ErrorBody,
      403: ErrorBody,
      404: ErrorBody,
      500: ErrorBody,
      503: ErrorBody,
    },
    summary: 'Run an admin CLI command in the running server (operator channel)',
    description: 'Not for integrators: the admin CLI uses it on the server\'s machine. A usage error is 400 VALIDATION_FAILED with the CLI\'s message.',
    metadata: meta({ auth: 'operator', scopes: [], tag: 'Operator', operationId: 'runOperatorCommand' }),
  },
});
