import type { EventSubscriber, TransactionEventArgs } from '@mikro-orm/core';
import type { Orm } from '../../db/orm.js';

/**
 * Immediate wake-up of the workers in this process after a local enqueue commits. Only a
 * latency shortcut: workers also poll, so deliveries enqueued by other processes (or a
 * missed wake-up) are picked up at the next poll.
 */
const listeners = new Set<() => void>();
let enqueuedSinceCommit = false;

/** Called inside the enqueuing transaction; the wake-up fires after the next top-level commit. */
export function markEnqueued(): void {
  enqueuedSinceCommit = true;
}

export function onWake(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

const subscriber: EventSubscriber = {
  afterTransactionCommit(args: TransactionEventArgs) {
    if (args.transaction && 'savepointName' in args.transaction && args.transaction.savepointName) return;
    if (!enqueuedSinceCommit) return;
    enqueuedSinceCommit = false;
    for (const l of listeners) l();
  },
};

/** Registers the commit subscriber on an ORM (idempotent: the event manager keeps a set). */
export function watchCommits(orm: Orm): void {
  orm.em.getEventManager().registerSubscriber(subscriber);
}
