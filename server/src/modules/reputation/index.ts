/** The reputation module's public API: scores read and moved by observed or reported outcomes (what other modules may call). */
export {
  applyOutcome,
  applyOutcomes,
  applyReportedOutcome,
  NEUTRAL_SCORE,
  outcomeDeltas,
  projectView,
  readReputation,
  reputationOf,
  subjectKey,
  type Outcome,
  type Reputation,
  type ReputationReader,
  type SessionOutcome,
  type SubjectType,
} from './service.js';
export { reputationCtes, type ReputationDelta, type ReputationView } from './store.js';
