/** The delivery queue's name (its keys sit under `<prefix>:{webhooks}:q`). */
export const DELIVERY_QUEUE = 'webhook-deliveries';

/** Attempts of one delivery: the first, then retries 5 s, 10 s, 20 s, … apart (about 45 hours in all). */
export const DELIVERY_ATTEMPTS = 16;

/** The first retry's delay, ms; each next one doubles it (BullMQ's exponential backoff). */
export const FIRST_RETRY_MS = 5000;

/** How long one attempt may take before it counts as failed, ms. */
export const ATTEMPT_TIMEOUT_MS = 10_000;

/** One event for one webhook. Its job id is `<webhookId>_<eventId>`: the same event is queued once per webhook. */
export interface DeliveryJob {
  readonly webhookId: string;
  /** The event's SSE id: the `webhook-id` of every attempt. */
  readonly eventId: string;
  readonly type: string;
  /** The body sent: the event's `data` as the SSE streams have it. */
  readonly body: string;
}

/** The job id of an event's delivery to a webhook (BullMQ refuses `:` in custom ids). */
export function deliveryJobId(webhookId: string, eventId: string): string {
  return `${webhookId}_${eventId}`;
}

/** The delay before the retry that follows failed attempt `attempt` (1-based), ms. */
export function retryDelayMs(attempt: number): number {
  return FIRST_RETRY_MS * 2 ** (attempt - 1);
}
