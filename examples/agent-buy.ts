/**
 * Agent: discover a merchant, browse, buy with a viem local account (test mode: the mock
 * facilitator checks the EIP-712 signature and moves no funds), verify the receipt.
 *
 *   SVC_MERCHANT_URL=http://localhost:3000/m/mrch_... npx tsx examples/agent-buy.ts
 *
 * Env: SVC_MERCHANT_URL (a merchant's verified domain, a discovery host or a /m/<id>/ base; required),
 * SVC_AGENT_PRIVATE_KEY (0x...; default: a fresh key), SVC_AGENT_ID (a stable UUID; default:
 * a fresh one), SVC_SKU (default: the first available item), SVC_QTY (default 1).
 * The last line printed is a JSON summary for scripts.
 */
import { randomUUID } from 'node:crypto';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';
import type { Hex } from 'viem';
import { AgentClient, ReceiptVerificationError, SvcApiError } from '@svc/sdk/agent';

async function main() {
  const merchantUrl = process.env.SVC_MERCHANT_URL;
  if (!merchantUrl) throw new Error('set SVC_MERCHANT_URL');
  const account = privateKeyToAccount((process.env.SVC_AGENT_PRIVATE_KEY as Hex | undefined) ?? generatePrivateKey());
  const agent = new AgentClient({ account, agentId: process.env.SVC_AGENT_ID ?? randomUUID() });
  console.log(`agent ${agent.agentId}, wallet ${agent.address}`);

  // Discover: the manifest says where the catalog and checkout are, and how to pay.
  const shop = await agent.discover(merchantUrl);
  console.log(`shop ${shop.manifest.merchant.name} (${shop.merchantId}); rails ${shop.manifest.rails.join(', ')}`);

  // Browse.
  const items = await shop.catalog();
  for (const item of items) console.log(`  ${item.sku}: ${item.name} ${item.price.amount} ${item.price.currency}`);
  const sku = process.env.SVC_SKU ?? items[0]?.sku;
  if (!sku) throw new Error('the catalog is empty');

  // Buy: checkout, sign the EIP-3009 TransferWithAuthorization, settle.
  const outcome = await shop.buy([{ sku, qty: Number(process.env.SVC_QTY ?? '1') }], { buyer_intent: `buy ${sku}` });
  switch (outcome.status) {
    case 'accepted': {
      const claims = await shop.verifyReceipt(outcome.receipt);
      console.log(`accepted: order ${outcome.order_id}, settlement ${outcome.fulfillment.reference}`);
      console.log(`receipt ${claims.sub} verified: ${claims.total.total} ${claims.total.currency}, policy v${claims.policyVersion}`);
      console.log(JSON.stringify({ status: 'accepted', order_id: outcome.order_id, session_id: outcome.session_id, receipt_id: claims.sub }));
      return;
    }
    case 'hold': {
      console.log(`held for review (${outcome.reason_codes.join(', ')}); waiting for the merchant...`);
      const resolved = await outcome.waitForResolution({ intervalMs: 2000, timeoutMs: 10 * 60_000 });
      console.log(`resolved: ${resolved.status}`);
      console.log(JSON.stringify({ status: resolved.status, session_id: outcome.session_id }));
      return;
    }
    case 'payment_invalid':
    case 'rejected':
      console.log(`${outcome.status}: ${outcome.reason_codes.join(', ')} - ${outcome.error_human}`);
      console.log(JSON.stringify({ status: outcome.status, reason_codes: outcome.reason_codes, session_id: outcome.session_id }));
      process.exitCode = 1;
  }
}

main().catch((err: unknown) => {
  if (err instanceof SvcApiError) console.error(`${err.name} ${err.status} ${err.reasonCodes.join(',')}: ${err.errorHuman}`);
  else if (err instanceof ReceiptVerificationError) console.error(`receipt rejected (${err.reason}): ${err.message}`);
  else console.error(err);
  process.exit(1);
});
