import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function runExamples(): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/run-examples.ts'], { cwd: ROOT, env: process.env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, output }));
  });
}

describe('npm run examples', () => {
  it('GIVEN a fresh embedded database WHEN the three examples run against a real server THEN the purchase settles, the receipt verifies and the receiver gets order.settled once', async () => {
    const { code, output } = await runExamples();
    expect(output).toMatch(/\[agent-buy\] receipt rcpt_\w+ verified/);
    expect(output).toMatch(/\[webhook-receiver\] \{"received":"order\.settled".*"duplicate":false\}/);
    expect(output).toMatch(/\[webhook-receiver\] \{"received":"order\.settled".*"duplicate":true\}/);
    expect(output).toContain('[examples] all examples passed');
    expect(code, output).toBe(0);
  }, 300_000);
});
