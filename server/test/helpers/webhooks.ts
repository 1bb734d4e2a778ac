import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { ulid } from 'ulid';
import type { OrderEventObject, OrderEventType } from '@svc/contract';
import type { EventEnvelope } from '../../src/modules/events/service.js';
import type { TestApp, TestKey } from './harness.js';

export type Hit = { raw: Buffer; headers: IncomingHttpHeaders; path: string };
/** What the receiver does with the n-th hit (0-based): a status code, or hang until closed. */
export type Responder = (hit: Hit, index: number) => number | 'hang';

/** A real HTTP receiver on 127.0.0.1 that keeps the raw bytes and headers of every hit. */
export class Receiver {
  readonly hits: Hit[] = [];
  private waiters: Array<() => void> = [];
  private hanging: ServerResponse[] = [];
  private constructor(
    private readonly server: Server,
    public respond: Responder,
  ) {}

  static async start(respond: Responder = () => 200): Promise<Receiver> {
    const server = createServer();
    const receiver = new Receiver(server, respond);
    server.on('request', (req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const hit: Hit = { raw: Buffer.concat(chunks), headers: req.headers, path: req.url ?? '' };
        const index = receiver.hits.length;
        receiver.hits.push(hit);
        const action = receiver.respond(hit, index);
        if (action === 'hang') receiver.hanging.push(res);
        else res.writeHead(action, { 'content-type': 'text/plain' }).end('ok');
        for (const w of receiver.waiters.splice(0)) w();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return receiver;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  url(path = '/hook'): string {
    return `http://127.0.0.1:${this.port}${path}`;
  }

  /** Hits on one path (each endpoint gets its own path). */
  on(path: string): Hit[] {
    return this.hits.filter((h) => h.path === path);
  }

  async waitForHits(n: number, path?: string, timeoutMs = 90_000): Promise<Hit[]> {
    const count = () => (path ? this.on(path).length : this.hits.length);
    const deadline = Date.now() + timeoutMs;
    while (count() < n) {
      if (Date.now() > deadline) throw new Error(`receiver saw ${count()} hits${path ? ` on ${path}` : ''}, expected ${n}`);
      await new Promise<void>((resolve) => {
        this.waiters.push(resolve);
        setTimeout(resolve, 200);
      });
    }
    return path ? this.on(path) : this.hits;
  }

  async close(): Promise<void> {
    for (const res of this.hanging.splice(0)) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** Polls `probe` until it returns a truthy value (a barrier, never a timing assertion). */
export async function waitUntil<T>(probe: () => Promise<T | null | undefined | false>, what: string, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A realistic section 6 order object. */
export function orderObject(merchantId: string, overrides: Partial<OrderEventObject> = {}): OrderEventObject {
  const suffix = ulid().toLowerCase();
  return {
    id: `ord_${suffix}`,
    source: 'hosted',
    session_id: `sess_${suffix}`,
    merchant_id: merchantId,
    agent_id: randomUUID(),
    total: { currency: 'USD', subtotal: '12.50', tax: '0.00', total: '12.50' },
    items: [{ sku: 'TEE-1', qty: 1 }],
    rail_name: 'x402',
    settlement_ref: `0x${'ab'.repeat(32)}`,
    receipt_id: `rcpt_${suffix}`,
    mandate_type: 'none',
    mandate_ref: `sess_${suffix}`,
    trust_tier: 'standard',
    buyer: { name: 'Ada Lovelace', shipping_address: { line1: '1 Main St', city: 'London', postal_code: 'N1 1AA', country: 'GB' } },
    ...overrides,
  };
}

/** Records events through the outbox in one business transaction, as the settle path does. */
export async function recordEvents(
  app: TestApp,
  key: Pick<TestKey, 'projectId' | 'mode'>,
  types: OrderEventType[],
  object: OrderEventObject = orderObject('mrch_00000000000000000000000000'),
): Promise<EventEnvelope[]> {
  return app.services.orm.em.fork().transactional(async (tx) => {
    const out: EventEnvelope[] = [];
    for (const type of types) {
      out.push(await app.services.events.record(tx, { projectId: key.projectId, merchantId: null, livemode: key.mode === 'live', type, object }));
    }
    return out;
  });
}

/** Creates an endpoint through the API and returns its id and one-time secret. */
export async function createEndpoint(
  app: TestApp,
  key: TestKey,
  url: string,
  enabledEvents: string[] = ['*'],
): Promise<{ id: string; secret: string; body: any }> {
  const res = await app.request('POST', '/v1/webhooks/endpoints', { key, body: { url, enabled_events: enabledEvents } });
  if (res.status !== 201) throw new Error(`endpoint create failed: ${res.status} ${res.text}`);
  return { id: res.body.id, secret: res.body.secret, body: res.body };
}
