import type { AgentReputation, ReputationTier } from '@svc/contract';
import type { Em } from '../../db/orm.js';
import {
  applyProjectReputationDelta,
  applyReputationDeltas,
  findMerchantReputation,
  findReputation,
  MERCHANT_SETTLED_DELTA,
  NEUTRAL_SCORE,
  ownEntityManager,
  type ReputationDelta,
  type ReputationView,
  type StoredReputation,
} from './store.js';
import { ApiError } from '../../lib/errors.js';
import type { Services } from '../../http/context.js';

export type { ReputationView };
export { NEUTRAL_SCORE };
export type SubjectType = 'agent' | 'merchant';
/** A subject's reputation (the contract's reputation body, without the subject id). */
export type Reputation = Omit<AgentReputation, 'agentId'>;

/** Agent deltas per session outcome, merchant +2 per settled order (decisions.md). */
export const DELTAS = { accepted: 10, rejected: -15, payment_invalid: -5, replay_attempt: -25, held: 0, settled_merchant: MERCHANT_SETTLED_DELTA } as const;
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

/**
 * A subject's reputation as a viewer reads it: the shared score of the mode (null: never seen,
 * neutral) plus the viewer project's own adjustment (null: it reported nothing), clamped to
 * 0..1000. Known when either exists.
 */
export function reputationOf(stored: StoredReputation): Reputation {
  if (stored.score === null && stored.adjustment === null) return neutral();
  const score = Math.min(1000, Math.max(0, (stored.score ?? NEUTRAL_SCORE) + (stored.adjustment ?? 0)));
  return { score, tier: tierFor(score), known: true };
}

/** The shared score of a mode, for a reader that is no project (a public read without a key). */
export const sharedView = (livemode: boolean): ReputationView => ({ livemode, projectId: null });

/** A project's view in a mode: the shared score plus what the project's own ingest reported. */
export const projectView = (scope: { projectId: string; livemode: boolean }): ReputationView => ({ livemode: scope.livemode, projectId: scope.projectId });

export async function readReputation(em: Em, view: ReputationView, type: SubjectType, id: string): Promise<Reputation> {
  return reputationOf(await findReputation(em, view, type, subjectKey(id)));
}

/**
 * Applies one outcome the service observed itself (a hosted checkout's gate, payment or
 * settlement) to the shared score of its mode, at most once per (mode, session, subject,
 * outcome): the reputation_events primary key makes a repeat a no-op, inside the caller's
 * transaction (one statement; a repeat reads the score with a second).
 */
export async function applyOutcome(tx: Em, livemode: boolean, sessionId: string, type: SubjectType, subject: string, outcome: Outcome, now: Date): Promise<Reputation> {
  const subjectId = subjectKey(subject);
  const [moved] = await applyReputationDeltas(tx, [{ sessionId, livemode, subjectType: type, subjectId, delta: DELTAS[outcome], reason: outcome }], NEUTRAL_SCORE, now);
  if (!moved) return readReputation(tx, sharedView(livemode), type, subjectId);
  return reputationOf({ score: Number(moved.score), adjustment: null });
}

/**
 * Applies one outcome a project reported through ingest: it moves only that project's view in
 * the key's mode (the service cannot verify a report, so a report never reaches the score other
 * projects read). At most once per (mode, session, subject, outcome). Answers the project's view.
 */
export async function applyReportedOutcome(
  tx: Em,
  scope: { projectId: string; livemode: boolean },
  sessionId: string,
  type: SubjectType,
  subject: string,
  outcome: Outcome,
  now: Date,
): Promise<Reputation> {
  const subjectId = subjectKey(subject);
  const moved = await applyProjectReputationDelta(tx, scope.projectId, { sessionId, livemode: scope.livemode, subjectType: type, subjectId, delta: DELTAS[outcome], reason: outcome }, now);
  return moved ? reputationOf(moved) : readReputation(tx, projectView(scope), type, subjectId);
}

/**
 * Several outcomes of one session (e.g. the agent's `accepted` and the merchant's
 * `settled_merchant`), each at most once, in one statement and in the order given.
 */
export async function applyOutcomes(tx: Em, sessionId: string, livemode: boolean, outcomes: SessionOutcome[], now: Date): Promise<void> {
  await applyReputationDeltas(tx, outcomeDeltas(sessionId, livemode, outcomes), NEUTRAL_SCORE, now);
}

export type SessionOutcome = { type: SubjectType; subject: string; outcome: Outcome };

/** The deltas of a session's outcomes, for `applyOutcomes` or a statement that applies them with other writes (`reputationCtes`). */
export function outcomeDeltas(sessionId: string, livemode: boolean, outcomes: SessionOutcome[]): ReputationDelta[] {
  return outcomes.map((o) => ({ sessionId, livemode, subjectType: o.type, subjectId: subjectKey(o.subject), delta: DELTAS[o.outcome], reason: o.outcome }));
}

/** Races `read` against `timeoutMs`: a public lookup never throws and never waits longer; anything wrong is the neutral default. */
async function withinBudget(read: () => Promise<Reputation>, timeoutMs: number): Promise<Reputation> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<Reputation>((resolve) => {
    timer = setTimeout(() => resolve(neutral()), timeoutMs);
  });
  try {
    return await Promise.race([read().catch(() => neutral()), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Who reads a public reputation route: the project and mode of a valid key or session, else nobody (null). */
export type ReputationReader = (em: Em) => Promise<{ projectId: string; livemode: boolean } | null>;

const RESERVED_SEGMENTS = new Set(['agent', 'merchant']);

/**
 * GET /v1/reputation/(agent/)<agentId>: the key's project view in the key's mode, or the shared
 * live score for a reader without a (valid) key. On a fresh EntityManager so a slow lookup that
 * times out leaves nothing half-used on the request's own; the reader's key is resolved inside
 * the same time budget.
 */
export async function agentReputation(services: Pick<Services, 'orm'>, agentId: string, reader: ReputationReader, timeoutMs = 800) {
  if (RESERVED_SEGMENTS.has(agentId.toLowerCase())) {
    throw new ApiError('VALIDATION_FAILED', `"${agentId}" is a reserved segment; use /v1/reputation/agent/<agentId> or /v1/reputation/merchant/<merchantId>.`);
  }
  const em = ownEntityManager(services.orm);
  const rep = await withinBudget(async () => {
    const who = await reader(em).catch(() => null);
    return readReputation(em, who ? projectView(who) : sharedView(true), 'agent', agentId);
  }, timeoutMs);
  return { agentId, ...rep };
}

/**
 * GET /v1/reputation/merchant/<merchantId>: the merchant's score in its own mode (a merchant
 * belongs to one mode), with the reader project's own reports when it has a key.
 */
export async function merchantReputation(services: Pick<Services, 'orm'>, merchantId: string, reader: ReputationReader, timeoutMs = 800) {
  const em = ownEntityManager(services.orm);
  const rep = await withinBudget(async () => {
    const who = await reader(em).catch(() => null);
    const stored = await findMerchantReputation(em, who?.projectId ?? null, merchantId);
    return stored ? reputationOf(stored) : neutral();
  }, timeoutMs);
  return { merchantId, ...rep };
}
