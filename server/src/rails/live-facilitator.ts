import { ApiError } from '../lib/errors.js';
import type { Facilitator, FacilitatorHealth, SettleOutcome, VerifyResult } from './types.js';

/**
 * Live mode while SVC_LIVE_FACILITATOR is unset: every settle fails with 503
 * FACILITATOR_UNAVAILABLE, so a live payment can never reach the mock.
 */
export class UnconfiguredLiveFacilitator implements Facilitator {
  readonly name = 'unconfigured-live';
  readonly inProcess = false;

  async verify(): Promise<VerifyResult> {
    throw new ApiError('FACILITATOR_UNAVAILABLE');
  }

  async settle(): Promise<SettleOutcome> {
    throw new ApiError('FACILITATOR_UNAVAILABLE');
  }

  async reconcile(): Promise<SettleOutcome> {
    throw new ApiError('FACILITATOR_UNAVAILABLE');
  }

  async health(): Promise<FacilitatorHealth> {
    return { ok: true, detail: { facilitator: 'none', live: 'live settles answer 503 FACILITATOR_UNAVAILABLE (SVC_LIVE_FACILITATOR is unset)' } };
  }

  async close(): Promise<void> {}
}
