import v8 from 'node:v8';

/**
 * How far V8 lets the old generation grow past what survived the last full collection, as a
 * percentage (`--heap-growing-percent`). Unset, V8 picks its own factor, up to 4x the live set
 * on a machine with gigabytes free: a server whose live set stays at about 64 MiB then reached
 * 295 MiB RSS under settle load (README "Memory"). A factor is not a cap: a large import still
 * gets all the heap it needs, one collection at a time.
 *
 * V8 reads the flag at every full collection, so setting it once the process runs takes
 * effect. A `--heap-growing-percent` given to node itself (a V8 option, so on the command line,
 * not in NODE_OPTIONS) wins; 0 leaves V8's own heuristics.
 */
export function applyHeapGrowth(percent: number, execArgv: readonly string[] = process.execArgv): 'applied' | 'node-flag' | 'off' {
  if (execArgv.some((a) => /^--heap[-_]growing[-_]percent(=|$)/.test(a))) return 'node-flag';
  if (percent <= 0) return 'off';
  v8.setFlagsFromString(`--heap-growing-percent=${Math.trunc(percent)}`);
  return 'applied';
}
