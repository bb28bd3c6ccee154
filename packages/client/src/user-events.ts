import type { SessionEventData } from './types.js';

/** The event types that end a session, and with it a user's stream. */
export const FINAL_TYPES: ReadonlySet<string> = new Set(['completed', 'failed', 'expired', 'stopped', 'lost']);

/** Order of a session's states in a user's stream: an event that does not move past what was seen is not news. */
function rankOf(type: SessionEventData['type']): number {
  return type === 'pending' ? 0 : type === 'running' ? 1 : type === 'ready' ? 2 : type === 'stopping' ? 3 : 4;
}

/**
 * Which events of a user's stream are news. A user's stream resumed after its first event (the state read
 * when it opened) may send again a change that state already showed: what does not move the session past
 * what was seen (a later fence, a later state, a new endpoint) is left out. Pure: it only remembers.
 */
export class UserEventFilter {
  #seen: { fence: number; rank: number; endpoint: string | undefined } | undefined;

  /** Whether `event` is news; if it is, it is now what was seen (after `withdrawn`, nothing was). */
  isNews(event: SessionEventData): boolean {
    const rank = rankOf(event.type);
    const endpoint = event.type === 'ready' ? event.endpoint : undefined;
    const seen = this.#seen;
    if (
      seen !== undefined &&
      (event.fence < seen.fence ||
        (event.fence === seen.fence && (rank < seen.rank || (rank === seen.rank && endpoint === seen.endpoint))))
    )
      return false;
    this.#seen = event.type === 'withdrawn' ? undefined : { fence: event.fence, rank, endpoint };
    return true;
  }
}
