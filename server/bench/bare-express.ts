import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pathToFileURL } from 'node:url';
import express from 'express';

/**
 * The read baseline: Express 5 answering GET /bare with a small JSON, nothing else. Run in the
 * bench's process beside an in-process server, or as its own process (`node --import tsx
 * server/bench/bare-express.ts`, PORT from the environment) beside a spawned one.
 */
export async function startBareExpress(port = 0): Promise<{ server: Server; url: string }> {
  const app = express();
  app.disable('x-powered-by');
  app.get('/bare', (_req, res) => {
    res.json({ ok: true, name: 'bare', items: [1, 2, 3] });
  });
  return new Promise((resolve) => {
    const server = app.listen(port, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/bare` }));
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { url } = await startBareExpress(Number(process.env.PORT ?? 0));
  process.stdout.write(`${url}\n`);
}
