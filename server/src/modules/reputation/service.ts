import type { AgentReputation, ReputationTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import { applyReputationDeltas, findReputationScore, type ReputationDelta } from './store.js';
import { ApiError } from '../../lib/errors.js';
import type { Services } from '../../services.js';

export const NEUTRAL_SCORE = 500;
export type SubjectType = 'agent' | 'merchant';
/** A subject's reputation (the contract's reputation body, without the subject id). */
export type Reputation = Omit<AgentReputation, 'agentId'>;

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

/** A subject's reputation from its stored score (null: never seen, the neutral default). */
export function reputationOfScore(score: number | null): Reputation {
  return score === null ? neutral() : { score, tier: tierFor(score), known: true };
}

export async function readReputation(em: Em, type: SubjectType, id: string): Promise<Reputation> {
  const score = await findReputationScore(em, type, subjectKey(id));
  if (score === undefined) return neutral();
  return { score, tier: tierFor(score), known: true };
}

/**
 * Applies one outcome's delta at most once per (session, subject, outcome): the
 * reputation_events primary key makes a repeat a no-op, inside the caller's transaction
 * (one statement; a repeat reads the score with a second).
 */
export async function applyOutcome(tx: Em, sessionId: string, type: SubjectType, subject: string, outcome: Outcome, now: Date): Promise<Reputation> {
  const subjectId = subjectKey(subject);
  const [moved] = await applyReputationDeltas(tx, [{ sessionId, subjectType: type, subjectId, delta: DELTAS[outcome], reason: outcome }], NEUTRAL_SCORE, now);
  if (!moved) return readReputation(tx, type, subjectId);
  const score = Number(moved.score);
  return { score, tier: tierFor(score), known: true };
}

/**
 * Several outcomes of one session (e.g. the agent's `accepted` and the merchant's
 * `settled_merchant`), each at most once, in one statement and in the order given.
 */
export async function applyOutcomes(tx: Em, sessionId: string, outcomes: SessionOutcome[], now: Date): Promise<void> {
  await applyReputationDeltas(tx, outcomeDeltas(sessionId, outcomes), NEUTRAL_SCORE, now);
}

export type SessionOutcome = { type: SubjectType; subject: string; outcome: Outcome };

/** The deltas of a session's outcomes, for `applyOutcomes` or a statement that applies them with other writes (`reputationCtes`). */
export function outcomeDeltas(sessionId: string, outcomes: SessionOutcome[]): ReputationDelta[] {
  return outcomes.map((o) => ({ sessionId, subjectType: o.type, subjectId: subjectKey(o.subject), delta: DELTAS[o.outcome], reason: o.outcome }));
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

const RESERVED_SEGMENTS = new Set(['agent', 'merchant']);

/**
 * GET /v1/reputation/(agent/)<agentId>: on a fresh EntityManager so a slow lookup that
 * times out leaves nothing half-used on the request's own.
 */
export async function agentReputation(services: Pick<Services, 'orm'>, agentId: string) {
  if (RESERVED_SEGMENTS.has(agentId.toLowerCase())) {
    throw new ApiError('VALIDATION_FAILED', `"${agentId}" is a reserved segment; use /v1/reputation/agent/<agentId> or /v1/reputation/merchant/<merchantId>.`);
  }
  return { agentId, ...(await lookupReputation(services.orm.em.fork(), 'agent', agentId)) };
}

/** GET /v1/reputation/merchant/<merchantId>. */
export async function merchantReputation(services: Pick<Services, 'orm'>, merchantId: string) {
  return { merchantId, ...(await lookupReputation(services.orm.em.fork(), 'merchant', merchantId)) };
}
