// The types of the session events the API streams (SSE `event`, and `type` in `data`) and webhooks carry.
// The endings are the session's terminal states.
import { terminalStates } from './vocabulary.js';

/**
 * The final event types: after one of them the session has ended (`withdrawn`: it never was), and a
 * user's stream (`/v1/users/{userId}/session/events`) ends after any of them but `withdrawn`.
 */
export const finalEventTypes = [...terminalStates, 'withdrawn'] as const;

/** A final event type. */
export type FinalEventType = (typeof finalEventTypes)[number];

/** Every session event type, in the order a session goes through them; `withdrawn`: an admission rolled back. */
export const sessionEventTypes = ['pending', 'running', 'ready', 'stopping', ...finalEventTypes] as const;

/** A session event type. */
export type SessionEventType = (typeof sessionEventTypes)[number];

/** True when `type` is a final event type (for a client reading event types as strings). */
export function isFinalEventType(type: string): type is FinalEventType {
  return (finalEventTypes as readonly string[]).includes(type);
}
