import { benchLive } from './live.js';
import { benchWebhooks } from './webhooks.js';

/** `npm run bench`: each benchmark runs to completion on its own and prints one result line. Not a test. */
const benches: Array<[string, () => Promise<string>]> = [
  ['webhooks', () => benchWebhooks()],
  ['live', () => benchLive()],
];

for (const [name, run] of benches) {
  try {
    process.stdout.write(`${await run()}\n`);
  } catch (err) {
    process.stderr.write(`${name}: failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  }
}
