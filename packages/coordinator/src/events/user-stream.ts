import type { SessionView } from '../session-types.js';
import type { EventSubscription } from './event-subscription.js';
import { SLOT_COUNT } from '../slots.js';
import { finalEventTypes, type SessionEventType, type UserEvent } from './session-event.js';

/** An event of a user's stream with its SSE id: resuming after it (`Last-Event-ID`) misses nothing. */
export type UserStreamEvent = UserEvent & { readonly id: string };

/**
 * The id of a stream's first event, the current state read when the stream opened: the end of the
 * millisecond the subscription joined at, so a resume after it replays exactly the events after those
 * the state could already reflect (a change it did reflect comes again, and is no news to the reader).
 */
export function snapshotId(joinedAt: number): string {
  return `${joinedAt}-${Number.MAX_SAFE_INTEGER}-${SLOT_COUNT - 1}`;
}

/** Order of a session's states: an event that does not move past what a reader saw is not news. */
function rankOf(type: SessionEventType): number {
  switch (type) {
    case 'pending':
      return 0;
    case 'running':
      return 1;
    case 'ready':
      return 2;
    case 'stopping':
      return 3;
    default:
      return 4;
  }
}

/** The current state of a live session, as the first event of a user's stream. */
export function currentStateEvent(session: SessionView): UserEvent {
  const type: SessionEventType = session.state === 'running' && session.ready ? 'ready' : session.state;
  return {
    type,
    sessionId: session.sessionId,
    userId: session.userId,
    fence: session.fence,
    at: session.state === 'pending' ? session.createdAt : (session.startedAt ?? session.createdAt),
    pool: session.pool,
    labels: session.labels,
    ...(session.workerId === undefined ? {} : { workerId: session.workerId }),
    ...(type === 'ready' && session.endpoint !== undefined ? { endpoint: session.endpoint } : {}),
    ...(type === 'ready' && session.port !== undefined ? { port: session.port } : {}),
    ...(type === 'running' && session.deadline !== undefined ? { deadline: session.deadline } : {}),
    ...(type === 'pending' ? { lifetimeMs: session.lifetimeMs } : {}),
  };
}

/** What a user's reader has seen of the session it follows. */
interface Seen {
  readonly fence: number;
  readonly rank: number;
  readonly endpoint: string | undefined;
}

/** True when `event` tells a reader who has seen `seen` something new. */
function isNews(event: UserEvent, seen: Seen | undefined): boolean {
  // No session when we looked: an ending queued before the look is the previous session's.
  if (seen === undefined) return event.type === 'pending';
  if (event.fence !== seen.fence) return event.fence > seen.fence;
  const rank = rankOf(event.type);
  return rank > seen.rank || (rank === seen.rank && event.type === 'ready' && event.endpoint !== seen.endpoint);
}

/**
 * One user's current or next session, as {@link EventFeed.followUser} serves it: its current state
 * first (nothing while the user has none), then each change (an event that does not move the session
 * past what was sent is left out), ending after a final event; a `withdrawn` admission never was, so
 * the stream waits for the user's next session instead. Its iterator closes the subscription when it
 * ends; it throws {@link SlowReaderError} when the reader fell behind.
 */
export class UserStream implements AsyncIterable<UserStreamEvent> {
  readonly #subscription: EventSubscription;
  readonly #current: SessionView | undefined;
  readonly #resumed: boolean;

  /**
   * @internal `resumed`: the reader has the events up to the subscription's `after` already: no current
   * state first, and the first event is news whatever it is.
   */
  constructor(subscription: EventSubscription, current: SessionView | undefined, resumed = false) {
    this.#subscription = subscription;
    this.#current = current;
    this.#resumed = resumed;
  }

  /** See {@link EventSubscription.onEnd}. */
  onEnd(callback: (failure: Error | undefined) => void): void {
    this.#subscription.onEnd(callback);
  }

  /** Ends the stream. */
  close(): void {
    this.#subscription.close();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<UserStreamEvent> {
    let seen: Seen | undefined;
    let first = this.#resumed;
    const see = (event: UserEvent): void => {
      seen = { fence: event.fence, rank: rankOf(event.type), endpoint: event.endpoint };
    };
    try {
      if (this.#current !== undefined) {
        const event = { ...currentStateEvent(this.#current), id: snapshotId(this.#subscription.joinedAt) };
        see(event);
        yield event;
      }
      for await (const event of this.#subscription) {
        if (!first && !isNews(event, seen)) continue;
        first = false;
        see(event);
        yield event;
        if (event.type === 'withdrawn') seen = undefined;
        else if (finalEventTypes.has(event.type)) return;
      }
    } finally {
      this.#subscription.close();
    }
  }
}
