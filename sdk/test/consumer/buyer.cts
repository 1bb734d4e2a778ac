// A CommonJS buyer in the consumer project: tsc (nodenext, strict) compiles these imports to
// require() calls, which resolve @svc/sdk's CommonJS build (dist/cjs) and its .d.ts. It buys one
// espresso in test mode from the shop at SVC_SHOP_URL and verifies the receipt. Prints one JSON line.
import { AgentClient } from '@svc/sdk/agent';
import { reasonCodes } from '@svc/contract';
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts';

async function main(): Promise<void> {
  const agent = new AgentClient({ account: privateKeyToAccount(generatePrivateKey()) });
  const shop = await agent.discover(process.env.SVC_SHOP_URL!);
  const outcome = await shop.buy([{ sku: 'espresso', qty: 1 }]);
  if (outcome.status !== 'accepted') throw new Error(`purchase not accepted: ${JSON.stringify(outcome)}`);
  const claims = await shop.verifyReceipt(outcome.receipt);
  console.log(
    JSON.stringify({
      node: process.version,
      commonjs: typeof module !== 'undefined' && typeof exports === 'object',
      sdk: require.resolve('@svc/sdk/agent'),
      contract: require.resolve('@svc/contract'),
      status: outcome.status,
      order: outcome.order_id,
      receiptOrder: claims.orderId,
      reasonCodes: reasonCodes.length,
    }),
  );
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
