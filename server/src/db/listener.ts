import pg from 'pg';
import type { Logger } from '../lib/logger.js';
import type { DbTimeouts } from './orm.js';

export type ListenerHandlers = {
  /** A notification on the channel (delivered by PostgreSQL when the notifying transaction commits). */
  onNotify(payload: string): void;
  /** LISTEN is in place: from now on every commit that notifies reaches onNotify. */
  onUp(): void;
  /** The session is lost (or was never opened): notifications may be missed until the next onUp. */
  onDown(): void;
};

export type ListenerOptions = {
  url: string;
  channel: string;
  timeouts: DbTimeouts;
  /** How often the session is pinged, so a silently dead connection is noticed (and onDown called) within this plus the statement timeout. */
  heartbeatMs: number;
  /** First reconnect delay; doubles up to maxRetryMs. */
  retryMs?: number;
  maxRetryMs?: number;
};

/**
 * One dedicated PostgreSQL session LISTENing on one channel. A pooled connection cannot
 * listen (it is shared and returned to the pool), so this is a plain node-pg Client of its
 * own. It reconnects with backoff after a loss; onDown/onUp bracket every period in which a
 * notification could have been missed, so the caller can stop trusting what it derived from
 * them. Not for PgBouncer in transaction mode: LISTEN needs a session.
 */
export class ChannelListener {
  private client: pg.Client | null = null;
  private started = false;
  private stopped = false;
  private up = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private heartbeat: NodeJS.Timeout | undefined;
  private retryMs: number;

  constructor(
    private readonly opts: ListenerOptions,
    private readonly handlers: ListenerHandlers,
    private readonly log: Logger,
  ) {
    this.retryMs = opts.retryMs ?? 250;
  }

  get listening(): boolean {
    return this.up;
  }

  /** Opens the session once; after a loss the listener reconnects on its own backoff. */
  start(): void {
    if (this.started || this.stopped) return;
    this.started = true;
    void this.connect();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    clearInterval(this.heartbeat);
    const client = this.client;
    this.client = null;
    this.markDown();
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    const { url, channel, timeouts } = this.opts;
    const client = new pg.Client({
      connectionString: url,
      keepAlive: true,
      connectionTimeoutMillis: timeouts.connectMs,
      query_timeout: timeouts.statementMs + 2000,
      statement_timeout: timeouts.statementMs,
      application_name: `svc-checkout listen ${channel}`,
    });
    this.client = client;
    client.on('notification', (msg) => {
      if (msg.channel === channel && client === this.client) this.handlers.onNotify(msg.payload ?? '');
    });
    client.on('error', (err) => this.lost(client, err));
    client.on('end', () => this.lost(client, new Error('connection ended')));
    try {
      await client.connect();
      await client.query(`listen ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      this.lost(client, err);
      return;
    }
    if (client !== this.client) return;
    this.up = true;
    this.retryMs = this.opts.retryMs ?? 250;
    this.handlers.onUp();
    clearInterval(this.heartbeat);
    this.heartbeat = setInterval(() => {
      client.query('select 1').catch((err: unknown) => this.lost(client, err));
    }, this.opts.heartbeatMs);
    this.heartbeat.unref();
  }

  private markDown(): void {
    const wasUp = this.up;
    this.up = false;
    if (wasUp || this.stopped) this.handlers.onDown();
  }

  private lost(client: pg.Client, err: unknown): void {
    if (client !== this.client) return;
    this.client = null;
    clearInterval(this.heartbeat);
    this.markDown();
    void client.end().catch(() => undefined);
    if (this.stopped) return;
    this.log.warn({ channel: this.opts.channel, err: err instanceof Error ? err.message : String(err), retry_ms: this.retryMs }, 'database listener lost; reading through until it is back');
    this.retryTimer = setTimeout(() => void this.connect(), this.retryMs);
    this.retryTimer.unref();
    this.retryMs = Math.min(this.retryMs * 2, this.opts.maxRetryMs ?? 5000);
  }
}
