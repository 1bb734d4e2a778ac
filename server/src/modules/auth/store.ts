import type { Em } from '../../db/orm.js';

/**
 * The user of an email, created if absent. An atomic upsert on the unique lower(email) index,
 * so two first sign-ins of one address at the same moment make one user (SQL on purpose:
 * the ORM has no insert-or-read in one statement). Returns whether this call created it.
 */
export async function upsertUserByEmail(tx: Em, id: string, email: string, now: Date): Promise<{ id: string; email: string; created: boolean }> {
  const inserted = await tx.execute<Array<{ id: string; email: string }>>(
    'insert into users (id, email, created_at) values (?, ?, ?) on conflict ((lower(email))) do nothing returning id, email',
    [id, email, now],
  );
  if (inserted[0]) return { ...inserted[0], created: true };
  const rows = await tx.execute<Array<{ id: string; email: string }>>('select id, email from users where lower(email) = lower(?)', [email]);
  return { ...rows[0]!, created: false };
}
