// The webhooks module's public API; other modules import it from here (app files may import its files).
export { webhooksRoutes } from './routes.js';
export { webhookFanOut } from './service.js';
export { CommitWake } from './wake.js';
export { startWebhookWorker, type WebhookWorker, type WebhookWorkerOptions } from './worker.js';
export { MAX_ATTEMPTS, RETRY_SCHEDULE_MS } from './queue.js';
export { countFailingEndpoints, webhookQueueStats, type WebhookQueueStats } from './store.js';
export { WebhookEndpointEntity, type WebhookEndpointRow } from './entity.js';
