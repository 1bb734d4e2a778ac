/** The list envelope every list route answers: newest first, `next_cursor` for the next page. */
export type Page<T> = { data: T[]; has_more: boolean; next_cursor: string | null };

/**
 * A lazy list: nothing is fetched until it is awaited or iterated.
 *
 * ```ts
 * for await (const order of client.orders.list({ limit: 100 })) { ... } // every page
 * const first = await client.orders.list().page();                      // one page
 * ```
 */
export class ListIterator<T, P extends Page<T> = Page<T>> implements AsyncIterable<T> {
  constructor(private readonly fetchPage: (cursor: string | undefined) => Promise<P>, private readonly startCursor?: string) {}

  /** The first page only (from the `cursor` given to `list`, if any). */
  page(): Promise<P> {
    return this.fetchPage(this.startCursor);
  }

  /** Every page in turn, following `next_cursor` while `has_more`. */
  async *pages(): AsyncGenerator<P, void, undefined> {
    let cursor = this.startCursor;
    for (;;) {
      const page = await this.fetchPage(cursor);
      yield page;
      if (!page.has_more || !page.next_cursor) return;
      cursor = page.next_cursor;
    }
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<T, void, undefined> {
    for await (const page of this.pages()) yield* page.data;
  }

  /** Collects items across pages, stopping after `max` (required, so a huge feed cannot exhaust memory). */
  async toArray(opts: { max: number }): Promise<T[]> {
    const out: T[] = [];
    if (opts.max <= 0) return out;
    for await (const item of this) {
      out.push(item);
      if (out.length >= opts.max) break;
    }
    return out;
  }
}
