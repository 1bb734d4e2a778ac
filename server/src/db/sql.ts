import type { EntityName } from '@mikro-orm/core';
import type { Kysely } from '@mikro-orm/sql';
import type { Em } from './orm.js';

/**
 * Parameterized statements for the hot paths of the `store.ts` files. MikroORM 7 inlines every
 * value into the SQL text it sends (a simple query per statement); `runSql` sends the text with
 * `$1..$n` placeholders and the values apart (the extended protocol), through the transaction of
 * `em` when one is open. On PostgreSQL the pool turns every such text into a named prepared
 * statement (db/prepared-statements.ts), so each connection parses and plans it once.
 *
 * Values: strings, numbers, booleans, Dates and null. JSON goes as a string cast in the SQL
 * (`$3::text::jsonb`): the two drivers serialize objects and arrays differently.
 */
export type SqlValue = string | number | boolean | Date | null;

/**
 * Bind parameters for a statement built in pieces (a store's CTEs composed into one statement):
 * `$(v)` appends a value and answers its placeholder, `json(v)` appends a JSON value as text
 * and answers `$n::text::jsonb` (null stays null). Placeholders number in the order the text is
 * built, so the pieces need not count for each other.
 */
export type SqlParams = { readonly params: SqlValue[]; $: (v: SqlValue | undefined) => string; json: (v: unknown) => string };

export function sqlParams(): SqlParams {
  const params: SqlValue[] = [];
  const $ = (v: SqlValue | undefined) => `$${params.push(v ?? null)}`;
  const json = (v: unknown) => `${$(v === null || v === undefined ? null : JSON.stringify(v))}::text::jsonb`;
  return { params, $, json };
}

/** A statement and its bind values, as a store builds it: run by `runSql`, or sent as it is by any node-pg client (the bench's ceiling). */
export type Statement = { text: string; params: SqlValue[] };

type Compiled = Parameters<Kysely<unknown>['executeQuery']>[0];

export async function runSql<R = Record<string, unknown>>(em: Em, text: string, params: readonly SqlValue[] = []): Promise<R[]> {
  // Kysely's CompiledQuery with a raw node: values travel apart from the text (the public API inlines them).
  const compiled = { sql: text, parameters: params, query: { kind: 'RawNode', sqlFragments: [text], parameters: [] }, queryId: { queryId: 'svc' } } as unknown as Compiled;
  try {
    const res = await em.getKysely().executeQuery(compiled);
    return res.rows as R[];
  } catch (err) {
    throw em.getDriver().convertException(err as Error);
  }
}

/**
 * A transaction on a bare pooled connection of the ORM's database (db/bare-transaction.ts), with
 * no unit of work: the settle hot path's. `run` sends one store statement and answers its rows.
 */
export class BareTx {
  constructor(readonly run: (st: Statement) => Promise<Array<Record<string, unknown>>>) {}
}

/** Where a store's statement runs: an entity manager (its transaction when one is open) or a bare transaction. */
export type SqlOn = Em | BareTx;

/** A store's statement run on `on`: an entity manager's connection (its transaction when one is open), or a bare transaction. */
export function runStatement<R = Record<string, unknown>>(on: SqlOn, st: Statement): Promise<R[]> {
  return on instanceof BareTx ? (on.run(st) as Promise<R[]>) : runSql<R>(on, st.text, st.params);
}

/**
 * An entity by primary key for a hot path: the one this unit of work already holds, returned as
 * it is (no SELECT, and unflushed changes are never refreshed away), else the row `read` fetches
 * (a store's prepared statement) mapped into the identity map; null when there is none.
 */
export async function entityById<T extends object>(
  em: Em,
  entity: EntityName<T>,
  id: string,
  read: (em: Em, id: string) => Promise<Record<string, unknown> | undefined>,
): Promise<T | null> {
  // (MikroORM types a primary key and a raw row per entity; here both are the plain forms it takes at run time.)
  const held = em.getUnitOfWork().getById<T>(entity, id as never);
  if (held) return held;
  const row = await read(em, id);
  return row ? em.map(entity, row as never) : null;
}
