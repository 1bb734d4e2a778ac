import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { applyHeapGrowth } from '../../src/lib/heap.js';
import { configFailure as failure } from '../helpers/config.js';
import { ROOT, runScript } from '../helpers/spawn.js';

const CHURN = join(ROOT, 'server/test/helpers/heap-churn.ts');

async function churn(percent: string): Promise<number> {
  const run = await runScript(CHURN, [], { SVC_HEAP_GROWTH_PERCENT: percent, NODE_OPTIONS: undefined }, 300_000);
  expect(run.code, run.stderr).toBe(0);
  return (JSON.parse(run.stdout.trim()) as { maxHeapTotalMiB: number }).maxHeapTotalMiB;
}

describe('SVC_HEAP_GROWTH_PERCENT (how far the heap grows past its live set)', () => {
  it('GIVEN nothing THEN 30; GIVEN 0 THEN V8 decides; GIVEN a bad value THEN one line naming the variable', () => {
    expect(loadConfig({}).SVC_HEAP_GROWTH_PERCENT).toBe(30);
    expect(loadConfig({ SVC_HEAP_GROWTH_PERCENT: '0' }).SVC_HEAP_GROWTH_PERCENT).toBe(0);
    expect(failure({ SVC_HEAP_GROWTH_PERCENT: '-1' })).toMatch(/^invalid configuration: SVC_HEAP_GROWTH_PERCENT /);
    expect(failure({ SVC_HEAP_GROWTH_PERCENT: 'lots' })).toMatch(/^invalid configuration: SVC_HEAP_GROWTH_PERCENT /);
  });

  it('GIVEN --heap-growing-percent on node itself THEN that wins; GIVEN 0 THEN nothing is set', () => {
    expect(applyHeapGrowth(30, ['--heap-growing-percent=80'])).toBe('node-flag');
    expect(applyHeapGrowth(30, ['--heap_growing_percent', '80'])).toBe('node-flag');
    expect(applyHeapGrowth(0, [])).toBe('off');
  });

  it('GIVEN a process started the way the server starts, churning objects that die old THEN its heap stays near the live set, far below V8 left alone', async () => {
    // The same program twice, at the same time: the default setting, and 0 (V8's own factor).
    const [growth30, v8Own] = await Promise.all([churn('30'), churn('0')]);
    // Measured here: about 210 MiB against about 480 MiB.
    expect(growth30).toBeLessThan(v8Own * 0.6);
    expect(growth30).toBeLessThan(280);
  }, 420_000);
});
