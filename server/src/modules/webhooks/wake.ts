import type { EventSubscriber, TransactionEventArgs } from '@mikro-orm/core';
import type { Orm } from '../../db/orm.js';

/**
 * Immediate wake-up of this process's delivery workers after a local enqueue commits. Only a
 * latency shortcut: workers also poll, so deliveries enqueued by other processes (or a
 * missed wake-up) are picked up at the next poll. One per ORM, built with the services.
 */
export class CommitWake {
  private readonly listeners = new Set<() => void>();
  private enqueuedSinceCommit = false;

  constructor(orm: Orm) {
    const subscriber: EventSubscriber = {
      afterTransactionCommit: (args: TransactionEventArgs) => {
        if (args.transaction && 'savepointName' in args.transaction && args.transaction.savepointName) return;
        if (!this.enqueuedSinceCommit) return;
        this.enqueuedSinceCommit = false;
        for (const l of this.listeners) l();
      },
    };
    orm.em.getEventManager().registerSubscriber(subscriber);
  }

  /** Called inside the enqueuing transaction; the wake-up fires after the next top-level commit. */
  markEnqueued(): void {
    this.enqueuedSinceCommit = true;
  }

  /** After a statement that enqueued outside any transaction (it committed on its own): wakes now if it enqueued. */
  committedOutsideTransaction(): void {
    if (!this.enqueuedSinceCommit) return;
    this.enqueuedSinceCommit = false;
    for (const l of this.listeners) l();
  }

  onWake(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}
