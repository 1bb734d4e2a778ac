import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { x402Facilitator } from '@x402/core/facilitator';
import { toFacilitatorEvmSigner } from '@x402/evm';
import { ExactEvmScheme } from '@x402/evm/exact/facilitator';
import { createWalletClient, http, publicActions } from 'viem';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import { base } from 'viem/chains';
import type { Anvil } from './anvil.js';

/** The bearer token the test facilitator demands (sent through SVC_FACILITATOR_AUTH_HEADER). */
export const X402_FACILITATOR_TOKEN = 'test-facilitator-token';
const TOKEN = X402_FACILITATOR_TOKEN;

export type Knobs = {
  settleDelayMs: number;
  seenAuth: (string | undefined)[];
  calls: string[];
  /** When set, /settle answers this status (a 4xx: refused before doing anything) and settles nothing. */
  settleStatus?: number;
};

/** A stock x402 v2 facilitator (x402Facilitator + @x402/evm's exact scheme) over HTTP, backed by anvil. */
export async function startX402Facilitator(anvil: Anvil, knobs: Knobs): Promise<{ url: string; server: Server }> {
  const account = privateKeyToAccount(generatePrivateKey());
  await anvil.setEthBalance(account.address, 10n ** 20n);
  const wallet = createWalletClient({ account, chain: base, transport: http(anvil.rpcUrl) }).extend(publicActions);
  const signer = toFacilitatorEvmSigner(Object.assign(wallet, { address: account.address }) as never);
  const facilitator = new x402Facilitator().register('eip155:8453', new ExactEvmScheme(signer));

  const body = async (req: IncomingMessage) => {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  };
  const server = createServer((req, res) => {
    void (async () => {
      knobs.calls.push(`${req.method} ${req.url}`);
      knobs.seenAuth.push(req.headers.authorization);
      if (req.headers.authorization !== `Bearer ${TOKEN}`) {
        res.writeHead(401, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'unauthorized' }));
        return;
      }
      let out: unknown;
      if (req.method === 'GET' && req.url === '/supported') out = facilitator.getSupported();
      else if (req.method === 'POST' && req.url === '/verify') {
        const b = await body(req);
        out = await facilitator.verify(b.paymentPayload, b.paymentRequirements);
      } else if (req.method === 'POST' && req.url === '/settle') {
        const b = await body(req);
        if (knobs.settleStatus) {
          res.writeHead(knobs.settleStatus, { 'content-type': 'application/json' }).end(JSON.stringify({ error: 'refused' }));
          return;
        }
        out = await facilitator.settle(b.paymentPayload, b.paymentRequirements);
        if (knobs.settleDelayMs) await new Promise((r) => setTimeout(r, knobs.settleDelayMs));
      } else {
        res.writeHead(404).end();
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(out, (_k, v) => (typeof v === 'bigint' ? v.toString() : v)));
    })().catch((err: unknown) => {
      res.writeHead(500, { 'content-type': 'application/json' }).end(JSON.stringify({ error: String(err) }));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

