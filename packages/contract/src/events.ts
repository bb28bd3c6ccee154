// The types of the session events the API streams (SSE `event`, and `type` in `data`) and webhooks carry.

/** Every session event type, in the order a session goes through them; `withdrawn`: an admission rolled back. */
export const sessionEventTypes = [
  'pending',
  'running',
  'ready',
  'stopping',
  'completed',
  'failed',
  'expired',
  'stopped',
  'lost',
  'withdrawn',
] as const;

/** A session event type. */
export type SessionEventType = (typeof sessionEventTypes)[number];

/**
 * The final event types: after one of them the session has ended (`withdrawn`: it never was), and a
 * user's stream (`/v1/users/{userId}/session/events`) ends after any of them but `withdrawn`.
 */
export const finalEventTypes = [
  'completed',
  'failed',
  'expired',
  'stopped',
  'lost',
  'withdrawn',
] as const satisfies readonly SessionEventType[];

/** A final event type. */
export type FinalEventType = (typeof finalEventTypes)[number];

/** True when `type` is a final event type (for a client reading event types as strings). */
export function isFinalEventType(type: string): type is FinalEventType {
  return (finalEventTypes as readonly string[]).includes(type);
}
