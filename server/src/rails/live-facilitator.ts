import { ApiError } from '../lib/errors.js';
import type { Facilitator, FacilitatorResult, SettleRequest } from './types.js';

/**
 * Live mode until a real facilitator is configured: every call fails with 503
 * FACILITATOR_UNAVAILABLE, so a live payment can never reach the mock.
 */
export class UnconfiguredLiveFacilitator implements Facilitator {
  readonly name = 'unconfigured-live';

  async verify(_req: SettleRequest): Promise<FacilitatorResult> {
    throw new ApiError('FACILITATOR_UNAVAILABLE');
  }

  async settle(_req: SettleRequest): Promise<FacilitatorResult> {
    throw new ApiError('FACILITATOR_UNAVAILABLE');
  }
}
