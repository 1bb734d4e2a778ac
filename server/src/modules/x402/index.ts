/** The x402 transport: the wire format in (headers, payloads) and out (challenges, PAYMENT-RESPONSE), and the paid resource. */
export { buyItems, settleAnyTransport, type PurchaseReply, type X402Cart, type Reply, type SettleReply, type X402Transport } from './service.js';
export { paymentTransportOf, sendX402 } from './http.js';
export { payerAgentId } from './agent-id.js';
