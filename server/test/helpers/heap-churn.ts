import { loadConfigOrExit } from '../../src/startup.js';

/**
 * Run by unit/heap.test.ts in its own process: starts the way the server does (the
 * configuration, with SVC_HEAP_GROWTH_PERCENT from the environment), keeps a live set, then
 * churns objects that live long enough to be promoted and die in the old generation (as a
 * settle's request objects do under load). Prints the largest heap V8 reserved on the way.
 */
loadConfigOrExit();
const live: unknown[] = [];
for (let i = 0; i < 200_000; i++) live.push({ id: `live-${i}`, a: [i, i + 1, i + 2] });
const ring: unknown[] = [];
let maxHeapTotal = 0;
for (let round = 0; round < 200; round++) {
  for (let i = 0; i < 15_000; i++) {
    ring.push({ round, i, text: `garbage-${i}`, arr: new Array(8).fill(i) });
    if (ring.length > 150_000) ring.splice(0, 50_000);
  }
  maxHeapTotal = Math.max(maxHeapTotal, process.memoryUsage().heapTotal);
}
process.stdout.write(`${JSON.stringify({ maxHeapTotalMiB: Math.round(maxHeapTotal / 2 ** 20), kept: live.length + ring.length })}\n`);
