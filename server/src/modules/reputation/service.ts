import type { ReputationTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';

export const NEUTRAL_SCORE = 500;
export type SubjectType = 'agent' | 'merchant';
export type Reputation = { score: number; tier: ReputationTier; known: boolean };

/** Agent deltas per session outcome, merchant +2 per settled order (decisions.md). */
export const DELTAS = { accepted: 10, rejected: -15, payment_invalid: -5, replay_attempt: -25, held: 0, settled_merchant: 2 } as const;
export type Outcome = keyof typeof DELTAS;

export function tierFor(score: number): ReputationTier {
  if (score < 400) return 'risky';
  if (score < 520) return 'standard';
  if (score < 700) return 'trusted';
  return 'elite';
}

export const neutral = (): Reputation => ({ score: NEUTRAL_SCORE, tier: 'standard', known: false });

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The stored subject id: a UUID is case-insensitive, so one agent has one record however it is spelled. */
export const subjectKey = (id: string) => (UUID_RE.test(id) ? id.toLowerCase() : id);

export async function readReputation(em: Em, type: SubjectType, id: string): Promise<Reputation> {
  const rows = await em.execute<Array<{ score: number }>>('select score from reputation where subject_type = ? and subject_id = ?', [
    type,
    subjectKey(id),
  ]);
  const row = rows[0];
  if (!row) return neutral();
  const score = Number(row.score);
  return { score, tier: tierFor(score), known: true };
}

/**
 * Applies one outcome's delta at most once per (session, subject, outcome): the
 * reputation_events primary key makes a repeat a no-op, inside the caller's transaction.
 */
export async function applyOutcome(tx: Em, sessionId: string, type: SubjectType, subject: string, outcome: Outcome): Promise<Reputation> {
  const delta = DELTAS[outcome];
  const subjectId = subjectKey(subject);
  const inserted = await tx.execute<Array<{ delta: number }>>(
    'insert into reputation_events (session_id, subject_type, subject_id, delta, reason) values (?, ?, ?, ?, ?) on conflict do nothing returning delta',
    [sessionId, type, subjectId, delta, outcome],
  );
  if (inserted.length === 0) return readReputation(tx, type, subjectId);
  const rows = await tx.execute<Array<{ score: number }>>(
    `insert into reputation (subject_type, subject_id, score, outcomes, updated_at)
     values (?, ?, least(1000, greatest(0, ? + ?)), 1, now())
     on conflict (subject_type, subject_id) do update
       set score = least(1000, greatest(0, reputation.score + excluded.score - ?)), outcomes = reputation.outcomes + 1, updated_at = now()
     returning score`,
    [type, subjectId, NEUTRAL_SCORE, delta, NEUTRAL_SCORE],
  );
  const score = Number(rows[0]!.score);
  return { score, tier: tierFor(score), known: true };
}

/** Public lookup: never throws, never waits more than `timeoutMs`; anything wrong is the neutral default. */
export async function lookupReputation(em: Em, type: SubjectType, id: string, timeoutMs = 800): Promise<Reputation> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Reputation>((resolve) => {
    timer = setTimeout(() => resolve(neutral()), timeoutMs);
  });
  try {
    return await Promise.race([readReputation(em, type, id).catch(() => neutral()), timeout]);
  } finally {
    clearTimeout(timer);
  }
}
