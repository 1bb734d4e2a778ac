// The events module's public API (the transactional outbox and the events table); other modules import it from here.
export {
  EventOutbox,
  type EventBody,
  type EventEnvelope,
  type EventFanOut,
  type OrderObjectInKeyOrder,
  type RecordEventInput,
} from './service.js';
export { eventCtes, findEventRow, insertEvents, listEventRows, type EventRow, type EventScope, type NewEventRow } from './store.js';
