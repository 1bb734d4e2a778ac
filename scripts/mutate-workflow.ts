/**
 * Hand-chosen mutants of the settlement workflow, which only HTTP tests against a database
 * and a chain can judge (Stryker, `npm run mutate`, covers the pure gate and money code).
 * Each mutant is applied to the working tree alone, the test files that should notice it run
 * (`vitest run --bail=1`), and the file is restored; the table says which mutants the tests
 * killed (each run's output is in reports/mutation-workflow/<id>.log: check that a kill failed
 * on the mutant, not on something else). A mutant whose text is no longer in the file is
 * reported `stale` (the code moved on: update the list). Not part of `npm test` or CI: it
 * takes one to two hours on 2 cores.
 *
 *   npm run mutate:workflow            # every mutant
 *   npm run mutate:workflow -- S7 E2   # some
 *   npm run mutate:workflow -- --check # does every mutant still apply?
 *
 * It edits source files in place (restored afterwards, also on Ctrl-C): run it on a clean
 * tree and run nothing else in the same checkout meanwhile. With DATABASE_URL set the tests
 * run on PostgreSQL (the advisory-lock mutant needs it: PGlite serializes every statement).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

type Mutant = {
  id: string;
  file: string;
  find: string;
  replace: string;
  /** Test files (under server/test/) that should fail, and optionally a test-name filter. */
  tests: string[];
  grep?: string;
  what: string;
};

const SETTLE = 'server/src/modules/settlement/settle.ts';
const OUTCOME = 'server/src/modules/settlement/outcome.ts';
const CAPTURE = 'server/src/modules/settlement/capture.ts';
const FINISH = 'server/src/modules/settlement/finish.ts';
const REVIEW = 'server/src/modules/settlement/review.ts';
const CHECKOUT_STORE = 'server/src/modules/checkout/store.ts';
const ENGINE = 'server/src/modules/settlement/engine.ts';
const ACCEPTED = 'server/src/modules/settlement/accepted.ts';
const SETTLEMENT_STORE = 'server/src/modules/settlement/store.ts';
const RECONCILER = 'server/src/modules/settlement/reconciler.ts';
const M_ORDERS = 'server/src/migrations/Migration20261121000002AgentProtocol.ts';
const M_SETTLEMENT = 'server/src/migrations/Migration20261123000001Settlement.ts';

export const MUTANTS: Mutant[] = [
  // The settle workflow and the hold review (settlement/settle.ts, outcome.ts, capture.ts, finish.ts, review.ts)
  { id: 'S1', file: OUTCOME, find: "new Set(['accepted', 'rejected', 'held'])", replace: "new Set(['accepted', 'rejected'])", tests: ['agent-hold'], what: 'a held session is not terminal for a repeated settle' },
  { id: 'S2', file: OUTCOME, find: 'if (s.settlePaymentHash === paymentHash) return settlementPending(s);', replace: 'return settlementPending(s);', tests: ['live-settle'], grep: 'does not mine', what: 'another payment while settling is told pending, not 409' },
  { id: 'S3', file: SETTLE, find: "if (sessionStateAt(s, input.now) === 'expired') {", replace: "if (s.state === 'expired') {", tests: ['agent-limits', 'agent-checkout'], what: 'a session past its lifetime still settles' },
  { id: 'S4', file: SETTLE, find: "if (m.livemode) throw new ApiError('TEST_MODE_RAIL_FORBIDDEN');", replace: '', tests: ['agent-settle', 'agent-orders'], what: 'the mock rail on a live merchant' },
  { id: 'S5', file: SETTLE, find: "if (mandate.present && !mandate.ok && mandate.code === 'MANDATE_ISSUER_UNAVAILABLE') {", replace: 'if (false) {', tests: ['agent-mandate'], what: 'an unreachable mandate issuer rejects for good' },
  { id: 'S6', file: SETTLE, find: "if (locked.state !== (approved ? 'approved' : 'awaiting_payment')) throw new ApiError('SESSION_EXPIRED');", replace: '', tests: ['agent-limits', 'agent-hold'], what: 'the state is not re-read under the row lock' },
  { id: 'S7', file: SETTLE, find: 'if (proof) checkNonceHolder(locked, inputs.nonceHolder);', replace: '', tests: ['agent-settle', 'gate-pins'], what: 'a replayed authorization is not refused' },
  { id: 'S8', file: CAPTURE, find: 'if (holder === s.id) return;', replace: 'if (holder) return;', tests: ['agent-settle', 'gate-pins'], what: "another session's reservation counts as ours" },
  { id: 'S9', file: FINISH, find: "await releaseReservations(tx, s.id);\n  const now = ctx.services.now();\n  s.state = 'rejected';", replace: "const now = ctx.services.now();\n  s.state = 'rejected';", tests: ['agent-policy', 'agent-settle', 'agent-mandate'], what: 'a rejection keeps the authorization and mandate reserved' },
  { id: 'S10', file: FINISH, find: 'await applyOutcome(tx, s.livemode, s.id, \'agent\', s.agentId, input.outcome, now);\n  const result = rejected(', replace: 'const result = rejected(', tests: ['agent-reputation', 'agent-policy'], what: 'a rejection does not cost the agent reputation' },
  { id: 'S11', file: SETTLE, find: "if (gate.verdict.decision === 'hold') return done(", replace: 'if (false) return done(', tests: ['agent-hold'], what: 'a hold verdict captures at once' },
  { id: 'S12', file: SETTLE, find: "const outcome = err.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid';", replace: "const outcome = 'payment_invalid';", tests: ['agent-settle', 'agent-reputation'], what: 'a replay costs what a bad proof costs' },
  { id: 'S13', file: REVIEW, find: 'const expired = reviewWindowLapsed(locked, now);', replace: 'const expired = false;', tests: ['agent-hold'], what: 'a hold can be approved after its review window' },
  { id: 'S14', file: REVIEW, find: '+ MIN_VALIDITY_SECONDS + APPROVAL_MIN_VALIDITY_SECONDS) {', replace: '+ MIN_VALIDITY_SECONDS) {', tests: ['agent-hold'], what: 'approval broadcasts an authorization about to expire' },
  { id: 'S15', file: REVIEW, find: "await reserveNonce({ tx, now, session: locked, proof });\n  }\n  const began", replace: '}\n  const began', tests: ['agent-hold'], what: 'approval does not re-reserve the nonce' },
  { id: 'S16', file: REVIEW, find: "await releasePaymentNonces(tx, s.id);\n  s.state = 'approved';", replace: "s.state = 'approved';", tests: ['agent-hold'], what: 'asking for a new authorization keeps the old nonce reserved' },
  { id: 'S17', file: FINISH, find: 'if (input.penalize) await applyOutcome(', replace: 'if (true) await applyOutcome(', tests: ['agent-hold'], what: 'a lapsed review costs the agent reputation' },
  { id: 'S18', file: FINISH, find: 'await releaseReservations(tx, s.id);\n  const order = s.orderId', replace: 'const order = s.orderId', tests: ['agent-hold'], what: 'a declined hold keeps its reservations' },

  // The gate's inputs (checkout/store.ts)
  { id: 'V1', file: CHECKOUT_STORE, find: "state in ('accepted', 'held', 'approved', 'settling')", replace: "state in ('accepted', 'held', 'approved')", tests: ['live-settle'], grep: 'velocity', what: 'velocity does not count sessions settling on chain' },
  { id: 'V2', file: CHECKOUT_STORE, find: "state in ('accepted', 'held', 'approved', 'settling')", replace: "state in ('accepted', 'approved', 'settling')", tests: ['agent-policy'], what: 'velocity does not count held sessions' },
  { id: 'V3', file: CHECKOUT_STORE, find: "state in ('accepted', 'held', 'approved', 'settling')", replace: "state in ('accepted', 'held', 'settling')", tests: ['agent-policy'], what: 'velocity does not count approved sessions' },
  { id: 'V4', file: CHECKOUT_STORE, find: "count(*) filter (where created_at > $5::timestamptz - interval '1 hour') as last_hour", replace: 'count(*) as last_hour', tests: ['agent-policy'], what: 'the hourly limit counts the whole day' },
  { id: 'V5', file: CHECKOUT_STORE, find: "and created_at > $5::timestamptz - interval '1 day')", replace: ')', tests: ['agent-policy'], what: 'the daily window never ends' },
  { id: 'V6', file: CHECKOUT_STORE, find: 'pg_advisory_xact_lock(hashtextextended($2, 0)) as gate_locked', replace: 'hashtextextended($2, 0) as gate_locked', tests: ['agent-policy'], what: 'concurrent settles of one agent are not serialized (PostgreSQL only)' },

  // Phase 2 and 3 (settlement/engine.ts)
  { id: 'E1', file: ENGINE, find: "return recorded > 0 ? { outcome: { status: 'pending', reference: null } } : { nothingSent: err };", replace: "return recorded >= 0 ? { outcome: { status: 'pending', reference: null } } : { nothingSent: err };", tests: ['live-remote'], what: 'a facilitator that sent nothing leaves the attempt pending' },
  { id: 'E2', file: ENGINE, find: "if (a.status !== 'pending') return storedOutcome(a, s);", replace: '', tests: ['live-settle'], grep: 'two resolvers', what: 'a resolved attempt is resolved again' },
  { id: 'E3', file: ENGINE, find: 's.state = a.returnState;', replace: "s.state = 'awaiting_payment';", tests: ['live-remote'], what: 'a failed approval hands a held session back as unpaid' },
  { id: 'E4', file: ENGINE, find: "if (opts.penalize !== false && a.returnState !== 'held') {", replace: "if (a.returnState !== 'held') {", tests: ['live-remote'], what: 'an unreachable facilitator costs the agent reputation' },
  { id: 'E5', file: ENGINE, find: '  if (s.orderId) return null;\n', replace: '', tests: ['live-settle'], grep: 'held live order', what: "an approved hold's settle writes a second order" },
  { id: 'E6', file: ENGINE, find: "outcome.code === 'NONCE_ALREADY_USED' ? 'replay_attempt' : 'payment_invalid', now);", replace: "'payment_invalid', now);", tests: ['live-settle'], grep: 'cancels the authorization', what: 'a spoiled nonce costs what a bad proof costs' },

  // The accept (settlement/accepted.ts, store.ts)
  { id: 'A1', file: ACCEPTED, find: "      { ...event, type: 'order.settled' },\n", replace: '', tests: ['agent-settle', 'webhooks-settle'], what: 'no order.settled event' },
  { id: 'A2', file: ACCEPTED, find: "      { type: 'merchant', subject: m.id, outcome: 'settled_merchant' },\n", replace: '', tests: ['agent-reputation'], what: "a sale does not move the merchant's reputation" },
  { id: 'A3', file: ACCEPTED, find: '  order.settlementRef = reference;\n', replace: '', tests: ['agent-settle', 'agent-orders'], what: 'the order carries no settlement reference' },
  { id: 'A4', file: ACCEPTED, find: '    settlementRef: reference,\n    chain:', replace: '    settlementRef: null,\n    chain:', tests: ['agent-settle', 'gate-pins'], what: 'the receipt does not name the settlement' },
  { id: 'A5', file: ACCEPTED, find: 'inputFingerprint: inputFingerprint(gate.fingerprintInputs),', replace: 'inputFingerprint: inputFingerprint({}),', tests: ['gate-pins'], what: "the receipt's fingerprint binds no input" },
  { id: 'A6', file: ACCEPTED, find: '    total: totalOf(s),\n    reasonCodes', replace: "    total: { ...totalOf(s), total: '0.00' },\n    reasonCodes", tests: ['agent-settle', 'gate-pins'], what: 'the receipt states another total' },
  { id: 'T1', file: SETTLEMENT_STORE, find: "::text and status = 'pending' returning session_id", replace: '::text returning session_id', tests: ['live-settle'], grep: 'two resolvers', what: 'phase 3 writes over an attempt already resolved' },
  { id: 'T2', file: CHECKOUT_STORE, find: 'where id = (select session_id from ${attemptCte}) and id = ', replace: 'where id = ', tests: ['live-settle'], grep: 'two resolvers', what: 'the session is accepted whether or not the attempt was settled by this statement' },

  // The database's invariants: funds moved iff one order, one receipt, one order.settled (a migration
  // mutated in place only for the run; its SQL keys the PGlite template, so tests make the database by initdb)
  { id: 'D1', file: M_ORDERS, find: "created_at timestamptz not null default now(),\n      constraint orders_session unique (session_id)\n", replace: 'created_at timestamptz not null default now()\n', tests: ['settlement-constraints'], what: 'a session may have two orders' },
  { id: 'D2', file: M_SETTLEMENT, find: 'create unique index receipts_order on receipts (order_id)', replace: 'create index receipts_order on receipts (order_id)', tests: ['settlement-constraints'], what: 'an order may have two receipts' },
  { id: 'D3', file: M_SETTLEMENT, find: 'create unique index events_one_settled_per_order on events', replace: 'create index events_one_settled_per_order on events', tests: ['settlement-constraints'], what: 'an order may have two order.settled events' },
  { id: 'D4', file: M_SETTLEMENT, find: 'create unique index settlement_attempts_open on', replace: 'create index settlement_attempts_open on', tests: ['settlement-constraints'], what: 'a session may have two live attempts' },
  { id: 'D5', file: M_SETTLEMENT, find: 'create unique index settlement_attempts_authorization on', replace: 'create index settlement_attempts_authorization on', tests: ['settlement-constraints'], what: 'one authorization may back two live attempts' },
  { id: 'D6', file: M_SETTLEMENT, find: "constraint settlement_attempts_settled_ref check (status <> 'settled' or reference is not null),", replace: '', tests: ['settlement-constraints'], what: 'a settled attempt without a reference' },

  // The settlement worker (settlement/reconciler.ts)
  { id: 'R1', file: RECONCILER, find: "heldLapsed ? 'REVIEW_WINDOW_EXPIRED' : 'SESSION_EXPIRED', penalize: false });", replace: "heldLapsed ? 'REVIEW_WINDOW_EXPIRED' : 'SESSION_EXPIRED', penalize: true });", tests: ['agent-hold'], what: 'a lapsed review costs the agent reputation' },
  { id: 'R2', file: CHECKOUT_STORE, find: "{ state: 'held', holdExpiresAt: { $lt: now } }, ", replace: '', tests: ['agent-hold'], what: 'lapsed holds are never swept' },
];

const ROOT = fileURLToPath(new URL('..', import.meta.url));

type Result = { id: string; status: 'killed' | 'survived' | 'stale'; what: string; seconds: number };

/** Each mutant's test output. */
const LOGS = `${ROOT}reports/mutation-workflow`;

/** Originals of the files being mutated, while they are (see `run`). */
const JOURNAL = `${LOGS}/originals`;
const journalOf = (file: string) => `${JOURNAL}/${file.replaceAll('/', '__')}`;

/** Puts back every file a killed run left mutated. */
function restoreLeftovers() {
  if (!existsSync(JOURNAL)) return;
  for (const name of readdirSync(JOURNAL)) {
    const file = name.replaceAll('__', '/');
    writeFileSync(`${ROOT}${file}`, readFileSync(`${JOURNAL}/${name}`));
    rmSync(`${JOURNAL}/${name}`);
    process.stdout.write(`restored ${file}, left mutated by a run that was killed\n`);
  }
}

/** Where the PGlite templates live; a mutated migration makes one of its own, removed after the run. */
const TEMPLATES = `${ROOT}node_modules/.cache/svc-checkout`;
const templates = () => (existsSync(TEMPLATES) ? readdirSync(TEMPLATES) : []);

function run(m: Mutant): Result {
  const path = `${ROOT}${m.file}`;
  const original = readFileSync(path, 'utf8');
  const started = Date.now();
  const count = original.split(m.find).length - 1;
  if (count !== 1) return { id: m.id, status: 'stale', what: `${m.what} (${count} matches)`, seconds: 0 };
  const before = templates();
  // The original is kept beside the logs until it is back in place: a run killed in between
  // (kill -9, a closed terminal) is undone by the next run before anything else.
  const saved = journalOf(m.file);
  mkdirSync(JOURNAL, { recursive: true });
  writeFileSync(saved, original);
  const restore = () => {
    writeFileSync(path, original);
    rmSync(saved, { force: true });
  };
  // Ctrl-C reaches the test run too; the file is restored below, then the process ends.
  const interrupted = () => {
    restore();
    process.exit(130);
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, interrupted);
  try {
    writeFileSync(path, original.replace(m.find, m.replace));
    const args = ['vitest', 'run', '--bail=1', ...m.tests.map((t) => `server/test/${t}.test.ts`), ...(m.grep ? ['-t', m.grep] : [])];
    const out = spawnSync('npx', args, { cwd: ROOT, encoding: 'utf8', env: process.env });
    const status = out.status === 0 ? 'survived' : 'killed';
    // What failed, to tell a kill from a test that failed for another reason (read it before trusting a kill).
    mkdirSync(LOGS, { recursive: true });
    writeFileSync(`${LOGS}/${m.id}.log`, `${m.file}: ${m.find} -> ${m.replace}\n\n${out.stdout}\n${out.stderr}`);
    return { id: m.id, status, what: m.what, seconds: Math.round((Date.now() - started) / 1000) };
  } finally {
    restore();
    for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.removeListener(signal, interrupted);
    for (const f of templates()) if (!before.includes(f)) rmSync(`${TEMPLATES}/${f}`, { force: true });
  }
}

function main() {
  restoreLeftovers();
  const args = process.argv.slice(2);
  if (args.includes('--check')) {
    // Only whether every mutant still applies (exactly one match), without running anything.
    for (const m of MUTANTS) {
      const n = readFileSync(`${ROOT}${m.file}`, 'utf8').split(m.find).length - 1;
      if (n !== 1) process.stdout.write(`${m.id} stale: ${n} matches in ${m.file}\n`);
    }
    return;
  }
  const only = new Set(args);
  const chosen = MUTANTS.filter((m) => only.size === 0 || only.has(m.id));
  const results: Result[] = [];
  for (const m of chosen) {
    const r = run(m);
    results.push(r);
    process.stdout.write(`${r.id.padEnd(4)} ${r.status.padEnd(8)} ${String(r.seconds).padStart(4)} s  ${m.file}: ${r.what}\n`);
  }
  const by = (s: Result['status']) => results.filter((r) => r.status === s).map((r) => r.id);
  process.stdout.write(`\nkilled ${by('killed').length}, survived ${by('survived').length} [${by('survived').join(' ')}], stale ${by('stale').length} [${by('stale').join(' ')}]\n`);
}

main();
