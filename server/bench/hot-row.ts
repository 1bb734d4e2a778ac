import { cpus } from 'node:os';
import pg from 'pg';
import { newBuyer } from '../test/helpers/agent.js';
import { figures, httpPoster, prepareSettles, publishShop, settleBatch, startPostgresEnv, type Figures, type Job, type Shop } from './core.js';

/**
 * `npm run bench -- hotrow`: does one merchant's sales queue behind one row? 32 agents buying
 * from one merchant against 32 agents spread over 32 merchants, the two interleaved round by
 * round in the same run (A B, B A, ...), test-mode settles over HTTP with pre-signed payments
 * on PostgreSQL. Target (issue 31): the one-merchant rate within 10% of the spread one. While
 * the one-merchant rounds run, PostgreSQL's backends are sampled (pg_stat_activity wait events,
 * and for a lock wait the relation it waits on from pg_locks), so a row lock a settle queues on
 * is named. Never a test: it prints PASS/MISS and fails only when a settle fails.
 */
export type HotRowOptions = { quick: boolean; spawn: boolean; dist?: boolean };

const AGENTS = 32;
const SAMPLE_MS = 20;

type Waits = { samples: number; busy: number; byEvent: Map<string, number> };

/** Samples the database's client backends every SAMPLE_MS until stopped: what each active one waits on. */
function waitSampler(url: string): { stop: () => Promise<Waits> } {
  const client = new pg.Client({ connectionString: url });
  const waits: Waits = { samples: 0, busy: 0, byEvent: new Map() };
  let running = true;
  const done = (async () => {
    await client.connect();
    while (running) {
      const { rows } = await client.query<{ ev: string; n: number }>(
        `select coalesce(a.wait_event_type || ':' || a.wait_event, 'cpu') ||
                coalesce(' on ' || (select string_agg(distinct coalesce(l.relation::regclass::text, l.locktype), ',')
                                      from pg_locks l where l.pid = a.pid and not l.granted), '') as ev, count(*)::int as n
         from pg_stat_activity a
         where a.datname = current_database() and a.backend_type = 'client backend' and a.state = 'active' and a.pid <> pg_backend_pid()
         group by 1`,
      );
      waits.samples++;
      for (const r of rows) {
        waits.busy += r.n;
        waits.byEvent.set(r.ev, (waits.byEvent.get(r.ev) ?? 0) + r.n);
      }
      await new Promise((r) => setTimeout(r, SAMPLE_MS));
    }
    await client.end();
  })();
  return {
    stop: async () => {
      running = false;
      await done;
      return waits;
    },
  };
}

const f0 = (x: number) => (Number.isFinite(x) ? x.toFixed(0) : '-');
const f1 = (x: number) => (Number.isFinite(x) ? x.toFixed(1) : '-');
const settleText = (f: Figures) => `${f0(f.perSec)}/s p50 ${f1(f.p50)} ms p99 ${f1(f.p99)} ms`;

export async function benchHotRow(opts: HotRowOptions): Promise<{ text: string; failures: string[] }> {
  const started = performance.now();
  const adminUrl = process.env.DATABASE_URL;
  if (!adminUrl) return { text: 'hotrow: needs PostgreSQL: set DATABASE_URL (e.g. postgresql://postgres@127.0.0.1:5432/test); skipped', failures: [] };
  const plan = opts.quick ? { rounds: 2, perRound: 192 } : { rounds: 8, perRound: 240 };
  const failures: string[] = [];
  const env = await startPostgresEnv(adminUrl, { parts: new Set(['settle']), quick: opts.quick, spawn: opts.spawn, dist: opts.dist });
  const client = httpPoster(env.url, 64);
  try {
    const one = await publishShop(env);
    const spread: Shop[] = [];
    for (let i = 0; i < AGENTS; i++) spread.push(await publishShop(env));
    const buyers = Array.from({ length: AGENTS }, () => newBuyer());
    /** `n` settles of one shop, or spread round-robin over the shops. */
    const prepare = async (shops: typeof spread, n: number): Promise<Job[]> => {
      // one shop after another (8 checkouts at a time each): all at once would be 256 concurrent checkouts
      const per: Job[][] = [];
      for (const s of shops) per.push(await prepareSettles(client.post, s, Math.ceil(n / shops.length), buyers));
      const jobs: Job[] = [];
      for (let i = 0; jobs.length < n; i++) for (const list of per) if (i < list.length && jobs.length < n) jobs.push(list[i]!);
      return jobs;
    };
    // warm-up: caches, pool connections, the JIT; every merchant's first settle
    const warm = await settleBatch(client.post, [...(await prepare([one], 32)), ...(await prepare(spread, 64))], 8);
    if (warm.samples.some((s) => !s.ok)) failures.push(`warm-up settles: ${warm.samples.filter((s) => !s.ok).length} of ${warm.samples.length} failed`);

    const oneSamples: Parameters<typeof figures>[0] = [];
    const spreadSamples: Parameters<typeof figures>[0] = [];
    let oneSeconds = 0;
    let spreadSeconds = 0;
    // the sampler runs during both kinds of round (it costs the server's process and PostgreSQL alike)
    const waitsOf = { one: { samples: 0, busy: 0, byEvent: new Map() } as Waits, spread: { samples: 0, busy: 0, byEvent: new Map() } as Waits };
    const timed = async (jobs: Job[], into: Waits) => {
      const sampler = waitSampler(env.target.url);
      const res = await settleBatch(client.post, jobs, AGENTS);
      const w = await sampler.stop();
      into.samples += w.samples;
      into.busy += w.busy;
      for (const [k, v] of w.byEvent) into.byEvent.set(k, (into.byEvent.get(k) ?? 0) + v);
      return res;
    };
    for (let r = 0; r < plan.rounds; r++) {
      const oneJobs = await prepare([one], plan.perRound);
      const spreadJobs = await prepare(spread, plan.perRound);
      const runOne = async () => {
        const res = await timed(oneJobs, waitsOf.one);
        oneSamples.push(...res.samples);
        oneSeconds += res.seconds;
      };
      const runSpread = async () => {
        const res = await timed(spreadJobs, waitsOf.spread);
        spreadSamples.push(...res.samples);
        spreadSeconds += res.seconds;
      };
      if (r % 2 === 0) {
        await runOne();
        await runSpread();
      } else {
        await runSpread();
        await runOne();
      }
    }
    const a = figures(oneSamples, oneSeconds);
    const b = figures(spreadSamples, spreadSeconds);
    for (const [what, f] of [['one merchant', a], ['32 merchants', b]] as const) {
      if (f.ok !== f.n) failures.push(`${what}: ${f.n - f.ok} of ${f.n} settles failed (${Object.entries(f.statuses).map(([s, k]) => `${k}x ${s}`).join(', ')})`);
    }
    const ratio = a.perSec / b.perSec;
    const waitText = (w: Waits) => {
      const share = (v: number) => f0((100 * v) / Math.max(1, w.busy));
      const locks = [...w.byEvent.entries()].filter(([k]) => k.startsWith('Lock:')).reduce((sum, [, v]) => sum + v, 0);
      const top = [...w.byEvent.entries()].sort((x, y) => y[1] - x[1]).slice(0, 6);
      return `${w.samples} samples, ${f1(w.busy / Math.max(1, w.samples))} active on average, ${share(locks)}% of active samples waiting on a lock: ${top.map(([k, v]) => `${k} ${share(v)}%`).join(', ')}`;
    };
    const lines = [
      `hotrow (${cpus().length} CPUs, Node ${process.versions.node}, ${opts.quick ? 'quick' : 'full'} run, ${env.describe}; ${AGENTS} agents, test-mode settles over HTTP with pre-signed payments, ` +
        `${plan.rounds} interleaved rounds of ${plan.perRound} settles each; ratio = one merchant / 32 merchants, same run):`,
      `  32 agents, one merchant   (n=${a.n})  ${settleText(a)}`,
      `  32 agents, 32 merchants   (n=${b.n})  ${settleText(b)}`,
      `  ratio ${(100 * ratio).toFixed(0)}%   target >= 90%   ${ratio >= 0.9 ? 'PASS' : 'MISS'}`,
      `  PostgreSQL's active backends (pg_stat_activity every ${SAMPLE_MS} ms, pg_locks for the relation of a lock wait), one merchant: ${waitText(waitsOf.one)}`,
      `  32 merchants: ${waitText(waitsOf.spread)}`,
      failures.length ? `  correctness: FAIL: ${failures.join('; ')}` : '  correctness: every settle under load accepted',
      `  hotrow section took ${((performance.now() - started) / 1000).toFixed(1)} s`,
    ];
    return { text: lines.join('\n'), failures };
  } finally {
    client.close();
    await env.stop();
  }
}
