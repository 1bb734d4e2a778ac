import { initServer } from '@ts-rest/express';
import { contract } from '@svc/contract';
import { ctxOf } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { runCli, UsageError } from './commands.js';

const s = initServer();

/** POST /v1/operator/cli: the admin CLI's command, run here because the embedded database is open here. */
export const operatorRoutes = s.router(contract.operator, {
  cli: async ({ req, body }) => {
    try {
      return { status: 200, body: { output: await runCli(body.argv, ctxOf(req).services) } };
    } catch (err) {
      if (err instanceof UsageError) throw new ApiError('VALIDATION_FAILED', err.message);
      if (err instanceof Error && 'code' in err && String(err.code).startsWith('ERR_PARSE_ARGS')) throw new ApiError('VALIDATION_FAILED', err.message);
      throw err;
    }
  },
});
