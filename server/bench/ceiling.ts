import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express from 'express';
import pg from 'pg';
import type { Hex } from 'viem';
import { PreparedStatementNames } from '../src/db/prepared-statements.js';
import type { Statement } from '../src/db/sql.js';
import { canonicalHash } from '../src/lib/canonical-json.js';
import { checkProof, type Authorization } from '../src/lib/eip3009.js';
import { facilitatorFor } from '../src/rails/index.js';
import { mockReference } from '../src/rails/mock-facilitator.js';
import { gateInputsOf, gateInputsStatement, settleRowOf, settleRowStatement, totalOf } from '../src/modules/checkout/index.js';
import type { GateContext } from '../src/modules/gate/index.js';
import { subjectKey } from '../src/modules/reputation/index.js';
import { freshAcceptWrite } from '../src/modules/settlement/accepted.js';
import { nonceKeyOf } from '../src/modules/settlement/capture.js';
import { attemptFields, markSettled } from '../src/modules/settlement/engine.js';
import { acceptedAttemptOutcome, acceptedAttemptStatement } from '../src/modules/settlement/store.js';
import type { Services } from '../src/services.js';

/**
 * The settle's realistic ceiling (issue 31): a minimal Express 5 + node-pg handler doing an
 * accepted test-mode settle's work and nothing else. It sends the statements the service sends,
 * built by the same builders the repository uses (checkout/store.ts `settleRowStatement`,
 * `gateInputsStatement`; settlement/store.ts `acceptedAttemptStatement`, with the row values
 * from settlement/accepted.ts `freshAcceptWrite`), so they cannot drift, as named prepared
 * statements in one transaction; it checks the same EIP-3009 signature (lib/eip3009.ts
 * `checkProof`, the server's signer pool) and signs the same Ed25519 receipt. No ORM, no
 * contract validation, no policy, no metrics, no logging; errors are a bare status.
 */

type Rows = Array<Record<string, unknown>>;
type Query = (st: Statement) => Promise<Rows>;

/** A transaction on the ceiling's database: a node-pg pool, or the PGlite instance the server uses. */
export type CeilingDb = { transaction: <T>(fn: (q: Query) => Promise<T>) => Promise<T>; close: () => Promise<void> };

/** `fn` on one client of `pool` between BEGIN and COMMIT (ROLLBACK when it throws). */
export async function pgTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('begin');
    const out = await fn(client);
    await client.query('commit');
    return out;
  } catch (err) {
    await client.query('rollback').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/** node-pg, each statement named and prepared per connection as the server's pool does (db/prepared-statements.ts). */
export function ceilingPool(url: string, max: number): CeilingDb {
  const pool = new pg.Pool({ connectionString: url, max });
  const names = new PreparedStatementNames();
  return {
    transaction: (fn) => pgTransaction(pool, (client) => fn(async (st) => (await client.query({ name: names.nameOf(st.text), text: st.text, values: st.params })).rows)),
    close: () => pool.end(),
  };
}

type PgliteTx = { query: (sql: string, params?: unknown[]) => Promise<{ rows: Rows }> };
/** PGlite as @mikro-orm/pglite holds it (its one session; transactions take turns). */
export function ceilingPglite(db: { transaction: <T>(cb: (tx: PgliteTx) => Promise<T>) => Promise<T> }): CeilingDb {
  return {
    transaction: (fn) => db.transaction((tx) => fn(async (st) => (await tx.query(st.text, st.params)).rows)),
    close: async () => undefined,
  };
}

class Refused extends Error {
  constructor(readonly status: number) {
    super(String(status));
  }
}

/** POST /m/<ref>/agent/checkout/<id>/settle with the JSON payment body, as the service's route. */
export async function startCeiling(services: Services, db: CeilingDb): Promise<{ server: Server; url: string; close: () => Promise<void> }> {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.use(express.json({ limit: '64kb' }));
  const facilitator = facilitatorFor(services.facilitators, false);
  app.post('/m/:merchant/agent/checkout/:id/settle', async (req, res) => {
    try {
      const payment = (req.body as { payment: { scheme: string; authorization: Authorization; signature: Hex } }).payment;
      const a = payment.authorization;
      const auth: Authorization = { ...a, validAfter: Number(a.validAfter), validBefore: Number(a.validBefore) };
      const canonical = { scheme: payment.scheme, authorization: auth, signature: payment.signature };
      const ref = req.params.merchant;
      const now = services.now();
      const nowSec = Math.floor(now.getTime() / 1000);
      const body = await db.transaction(async (q) => {
        const [row] = await q(settleRowStatement(req.params.id, ref.startsWith('mrch_') ? { id: ref } : { slug: ref.toLowerCase() }, true));
        if (!row) throw new Refused(404);
        const { session: s, merchant: m, byRef } = settleRowOf(row);
        if (!byRef) throw new Refused(404);
        if (s.state !== 'awaiting_payment') throw new Refused(409);
        const checked = await checkProof({ chain: s.chain!, payTo: s.payTo!, amountBaseUnits: s.amountBaseUnits!, authorization: auth, signature: payment.signature }, nowSec, services.signers);
        if (!checked.ok) throw new Refused(402);
        const proof = checked.proof;
        const nonce = nonceKeyOf(proof);
        const [g] = await q(gateInputsStatement({ id: s.id, merchantId: s.merchantId, agentId: s.agentId, agentSubject: subjectKey(s.agentId), livemode: m.livemode, projectId: m.projectId }, nonce, now));
        const inputs = gateInputsOf(g!, nonce);
        if (inputs.nonceHolder !== s.id) throw new Refused(402);
        const policyHash = inputs.policy?.hash ?? '';
        const velocity = inputs.velocity;
        const reputation = { score: inputs.agentReputation.score ?? 500, tier: 'cautious', known: inputs.agentReputation.score !== null };
        const gate = {
          mandate: { type: 'none', present: false, ok: true, ref: null },
          verdict: { decision: 'accept', tier: 'cautious', reasonCodes: [], signals: { rail: s.rail, total: s.total } },
          policyVersion: inputs.policy?.version ?? 0,
          policyHash,
          fingerprintInputs: {
            sessionId: s.id,
            lines: s.lines.map((l) => ({ sku: l.sku, qty: l.qty, unitPrice: l.unitPrice })),
            total: totalOf(s),
            rail: s.rail,
            payment: canonical,
            mandate: { type: 'none', ref: null },
            reputation,
            velocity,
            policyHash,
          },
        } as unknown as GateContext;
        s.policyVersion = gate.policyVersion;
        s.policyHash = policyHash;
        s.payment = canonical as unknown as Record<string, unknown>;
        const paymentHash = canonicalHash(canonical);
        const attempt = attemptFields(services, { session: s, facilitator, rail: s.rail, proof, paymentHash, returnState: 'awaiting_payment', now });
        const reference = mockReference(proof);
        markSettled(attempt, reference, now);
        const { write, writes } = await freshAcceptWrite(services, m, s, { attempt: { insert: attempt }, paymentHash, gate, reference, now });
        if (!acceptedAttemptOutcome(await q(acceptedAttemptStatement(write))).accepted) throw new Refused(500);
        return writes.result.body;
      });
      res.json(body);
    } catch (err) {
      res.status(err instanceof Refused ? err.status : 500).json({ error: err instanceof Error ? err.message : String(err) });
    }
  });
  const server = await new Promise<Server>((resolve) => {
    const s = app.listen(0, '127.0.0.1', () => resolve(s));
  });
  return {
    server,
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
      await db.close();
    },
  };
}
