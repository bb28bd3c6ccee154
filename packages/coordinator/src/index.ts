// The public surface of @cq/coordinator: its classes, their options and outcomes, and its errors.
export { Coordinator, type CoordinatorOptions } from './coordinator.js';
export { defaultPolicy, MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS, type Policy } from './options.js';
export { Keys, type UserKeys } from './keys.js';
export { SLOT_COUNT, slotOf } from './slots.js';
export { TimeoutError, withTimeout } from './timeout.js';
export { defaultScriptsDir, loadScripts, type ScriptName, type ScriptSource } from './script-loader.js';
export { isUnavailable, wrapRedisError, type RedisClient } from './redis-errors.js';
export { closeRedis } from './close-redis.js';
export type { ReplicaWait } from './replica-wait-pool.js';
export {
  CoordinatorError,
  InvalidArgumentError,
  UnavailableError,
  ScriptReplyError,
  errorCodes,
  type ErrorCode,
} from './errors.js';
export {
  TokenStore,
  parseToken,
  type Metadata,
  type ParsedToken,
  type IssueOptions,
  type IssueOutcome,
  type ConsumeOutcome,
} from './tokens.js';
export * from './limiters/index.js';
export {
  Claims,
  DEFAULT_LEASE_MS,
  Keepalive,
  LeaseLostError,
  LeaseManager,
  LOSS_WAIT_SLACK_MS,
  MAX_ENDPOINT_LENGTH,
  lossGuardArgs,
  type AcquireOptions,
  type AcquireOutcome,
  type ClaimOptions,
  type KeepaliveOptions,
  type Lease,
  type LeaseRenewAnswer,
  type RenewAnswer,
  type SessionRenewAnswer,
} from './liveness/index.js';
export { SessionStore } from './sessions.js';
export {
  sessionIdInSlot,
  slotOfSessionId,
  type BulkStop,
  type ListOptions,
  type ListPosition,
  type SessionById,
  type SessionFilter,
  type SessionPage,
} from './session-list.js';
export {
  EventFeed,
  EventSubscription,
  SlowReaderError,
  UserStream,
  EVENT_RETENTION_MS,
  comparePositions,
  finalEventTypes,
  parseEventId,
  type EventFeedOptions,
  type EventPosition,
  type SessionEvent,
  type SessionEventType,
  type FinalEventType,
  type UserEvent,
  type UserStreamEvent,
  type SubscribeOptions,
} from './events/index.js';
export * from './output/index.js';
export * from './webhooks/index.js';
export * from './session-types.js';
export { Sweeper, type FullScan, type SweeperOptions, type SweepResult } from './sweeper.js';
export { HostChannel, type HostChannelOptions } from './host-channel.js';
export { USER_ID_PATTERN, assertUserId } from './validate.js';
export { DEFAULT_POOL, POOL_PATTERN, MAX_LABELS } from '@cq/contract';
export {
  WorkerRegistry,
  type Capacity,
  type PoolView,
  type ReserveOutcome,
  type WorkerHeartbeat,
  type WorkerRecord,
  type WorkerState,
} from './workers.js';
export {
  NO_ISOLATION,
  containments,
  sessionFilesystems,
  sessionNetworks,
  type Containment,
  type Isolation,
  type SessionFilesystem,
  type SessionNetwork,
} from './isolation.js';
export { readIndex, type IndexSnapshot, type IndexedUser, type RecentEnding } from './live-index.js';
