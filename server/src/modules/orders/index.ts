/** Orders and receipts: the feed, the summary, the row builders and the data access of both tables. */
export type { OrderRow, ReceiptRow } from './entity.js';
export { presentOrder, presentOrderEvent, refundFigures, reorderOrderEventObject } from './present.js';
export { orderRow, receiptRow, type NewOrder } from './rows.js';
export { addOrder, addReceipt, addRefunded, FOREIGN_ORDER_OF_SESSION_SQL, insertOrderSql, insertReceiptSql, orderById, orderOfSession } from './store.js';
