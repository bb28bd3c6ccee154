// Webhook endpoints, their delivery logs and the dispatch cursor, kept in Redis.
export { WEBHOOK_DISPATCH_LEASE } from '../keys.js';
export {
  WebhookStore,
  DELIVERY_LOG_LENGTH,
  type CursorMove,
  type DeliveryAttempt,
  type Webhook,
} from './webhook-store.js';
