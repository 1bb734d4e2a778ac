import type { Services } from '../../http/context.js';
import { ApiError } from '../../lib/errors.js';
import { pingDatabase } from '../../db/orm.js';
import { liveReadiness } from '../../rails/index.js';

/** Readiness: the database answers (within its own timeout) and live mode's facilitator state. */
export async function readiness(services: Pick<Services, 'orm' | 'facilitators'>, timeoutMs = 1500) {
  if (!(await pingDatabase(services.orm, timeoutMs))) throw new ApiError('DATABASE_UNAVAILABLE');
  const live = await liveReadiness(services.facilitators.live, timeoutMs);
  return { ok: true as const, db: true as const, live };
}
