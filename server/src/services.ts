import type { Config } from './config.js';
import type { Orm } from './db/orm.js';
import type { SecretBox } from './lib/crypto.js';
import type { Logger } from './lib/logger.js';
import type { Facilitators } from './rails/index.js';

/** Process-wide dependencies, built once at start and shared by every request. */
export type Services = {
  config: Config;
  orm: Orm;
  box: SecretBox;
  log: Logger;
  now: () => Date;
  /** x402 facilitators by mode (test: the mock; live: SVC_LIVE_FACILITATOR). */
  facilitators: Facilitators;
};
