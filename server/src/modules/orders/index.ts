/** Orders and receipts: the feed, the summary, the row builders and the data access of both tables. */
export type { OrderRow, ReceiptRow } from './entity.js';
export { presentOrder, presentOrderEvent, reorderOrderEventObject } from './present.js';
export { orderRow, receiptRow, type NewOrder } from './rows.js';
export { addOrder, addReceipt, orderById, orderOfSession } from './store.js';
