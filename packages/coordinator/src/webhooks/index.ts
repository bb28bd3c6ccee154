// Webhook endpoints, their delivery logs and the dispatch cursor, kept in Redis.
export { WebhookStore, DELIVERY_LOG_LENGTH, type DeliveryAttempt, type Webhook } from './webhook-store.js';
