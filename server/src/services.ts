import type { Config } from './config.js';
import type { Orm } from './db/orm.js';
import type { RequestDbBudget } from './db/request-budget.js';
import type { SecretBox } from './lib/crypto.js';
import type { Logger } from './lib/logger.js';
import type { Facilitators } from './rails/index.js';
import type { EventOutbox } from './modules/events/service.js';
import type { CommitWake } from './modules/webhooks/wake.js';
import type { Mailer } from './modules/auth/mail.js';
import type { OperatorChannel } from './modules/operator/channel.js';
import type { AgentReadCache } from './modules/agent/cache.js';
import type { IssuerKeySets } from './modules/gate/mandate.js';
import type { ReceiptKeys } from './modules/gate/receipt.js';
import type { Metrics } from './lib/metrics.js';
import type { DomainProofIo } from './modules/merchants/domain.js';
import type { SignerRecovery } from './lib/signer-recovery.js';

/** Per-process caches (each says what invalidates it where it is read). */
export type Caches = { agent: AgentReadCache; issuerKeys: IssuerKeySets; receiptKeys: ReceiptKeys };

/** Process-wide dependencies, built once at start and shared by every request. */
export type Services = {
  config: Config;
  orm: Orm;
  /** Each HTTP request's total wait on PostgreSQL (SVC_DB_REQUEST_TIMEOUT_MS): app.ts runs every request under it. */
  dbRequests: RequestDbBudget;
  box: SecretBox;
  log: Logger;
  now: () => Date;
  /** x402 facilitators by mode (test: the mock; live: SVC_LIVE_FACILITATOR). */
  facilitators: Facilitators;
  /** EIP-712 signer recovery off the request thread (a worker-thread pool started at first use). */
  signers: SignerRecovery;
  /** The transactional outbox: `events.record(tx, …)` writes an event and its webhook deliveries. */
  events: EventOutbox;
  /** Wakes this process's delivery workers when a transaction that enqueued deliveries commits. */
  wake: CommitWake;
  caches: Caches;
  /** This instance's Prometheus registry and its counters (GET /metrics). */
  metrics: Metrics;
  /** Sign-in mail (SMTP when configured, else the link is logged outside production). */
  mailer: Mailer;
  /** The admin CLI's local channel into this server (opened by main.ts on the embedded database). */
  operator: OperatorChannel;
  /** Where a merchant's domain proof is looked up (DNS TXT, the https file); tests point them at local servers. */
  domainProof: DomainProofIo;
};
