// The event feed in its parts: the events and their codec, the watermark, the replay, the channel
// subscription, each reader's queue, one user's stream, and the feed that composes them.
export {
  EVENT_RETENTION_MS,
  finalEventTypes,
  type EventPosition,
  type FinalEventType,
  type SessionEvent,
  type SessionEventType,
  type UserEvent,
} from './session-event.js';
export { comparePositions, parseEventId } from './codec.js';
export { Watermark, type Receipt, type WatermarkOptions, type WatermarkStep } from './watermark.js';
export { EventSubscription, SlowReaderError, type SubscribeOptions } from './event-subscription.js';
export { UserStream, snapshotId, type UserStreamEvent } from './user-stream.js';
export { EventFeed, type EventFeedOptions } from './event-feed.js';
