/**
 * The process-wide Services and Caches are declared in the bottom layer (http/context.ts) with
 * the bottom-layer members; each module adds its own members by declaration merging in its
 * `services.ts`, listed here so the whole object can be read in one place. boot.ts builds it.
 */
import type {} from './modules/agent/services.js';
import type {} from './modules/auth/services.js';
import type {} from './modules/events/services.js';
import type {} from './modules/gate/services.js';
import type {} from './modules/merchants/services.js';
import type {} from './modules/operator/services.js';
import type {} from './modules/settlement/services.js';
import type {} from './modules/webhooks/services.js';

export type { Caches, Services } from './http/context.js';
