import { benchCore, type CorePart } from './core.js';
import { benchHotRow } from './hot-row.js';
import { benchLive } from './live.js';
import { benchWebhooks } from './webhooks.js';

/**
 * `npm run bench [-- <section>...] [--quick] [--spawn] [--dist]`: each section runs to completion on its
 * own and prints its result. Sections: webhooks, live, hotrow (one merchant's settles against 32 merchants'), core (= settle, pglite, reads, which can
 * also be named alone); none named runs them all. --dist serves the core section from the
 * compiled server (server/dist, after `npm run build`) in its own process. BENCH=core,reads,
 * BENCH_QUICK=1, BENCH_SPAWN=1 and BENCH_DIST=1 do the same from the environment. Exits 1 when a section fails, or when a
 * settle under load fails or double-orders. Not a test.
 */
const args = process.argv.slice(2);
const named = [...args.filter((a) => !a.startsWith('--')), ...(process.env.BENCH ?? '').split(',')].map((s) => s.trim()).filter(Boolean);
const flag = (name: string) => args.includes(`--${name}`) || ['1', 'true'].includes(process.env[`BENCH_${name.toUpperCase()}`] ?? '');
const quick = flag('quick');
const spawn = flag('spawn');
const dist = flag('dist');

const CORE_PARTS: CorePart[] = ['settle', 'pglite', 'reads'];
const known = new Set(['webhooks', 'live', 'hotrow', 'core', ...CORE_PARTS]);
const unknown = named.filter((n) => !known.has(n));
if (unknown.length) {
  process.stderr.write(`bench: unknown section ${unknown.join(', ')} (known: ${[...known].join(', ')})\n`);
  process.exit(2);
}
const all = named.length === 0;
const coreParts = new Set(CORE_PARTS.filter((p) => all || named.includes('core') || named.includes(p)));

const benches: Array<[string, () => Promise<string>]> = [];
if (all || named.includes('webhooks')) benches.push(['webhooks', () => benchWebhooks(quick ? { events: 500 } : {})]);
/** BENCH_LIVE_BUYERS=16 BENCH_LIVE_RELAYERS=4 BENCH_LIVE_BLOCK_TIMES=0: only those cells of the live section (comma-separated lists). */
const list = (name: string) => process.env[name]?.split(',').map(Number).filter((x) => Number.isInteger(x) && x >= 0);
const liveCells = { buyers: list('BENCH_LIVE_BUYERS'), relayers: list('BENCH_LIVE_RELAYERS'), blockTimes: list('BENCH_LIVE_BLOCK_TIMES') };
/** BENCH_LIVE_COUNT_RPC=1: both sides reach anvil through a counting proxy; the table gains JSON-RPC calls per paid request (a counting run, not for rates). */
const liveOptions = { ...Object.fromEntries(Object.entries(liveCells).filter(([, v]) => v?.length)), ...(process.env.BENCH_LIVE_COUNT_RPC === '1' ? { countRpc: true } : {}) };
if (all || named.includes('live')) benches.push(['live', () => benchLive(quick ? { buyers: [1, 4], relayers: [1], blockTimes: [0], mockSettles: 32, ...liveOptions } : liveOptions)]);
if (all || named.includes('hotrow')) {
  benches.push([
    'hotrow',
    async () => {
      const report = await benchHotRow({ quick, spawn: spawn || dist, dist });
      if (report.failures.length) process.exitCode = 1;
      return report.text;
    },
  ]);
}
if (coreParts.size) {
  benches.push([
    'core',
    async () => {
      const report = await benchCore({ parts: coreParts, quick, spawn: spawn || dist, dist });
      if (report.failures.length) process.exitCode = 1;
      return report.text;
    },
  ]);
}

for (const [name, run] of benches) {
  try {
    process.stdout.write(`${await run()}\n`);
  } catch (err) {
    process.stderr.write(`${name}: failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  }
}
