export { Coordinator, type CoordinatorOptions } from './coordinator.js';
export { defaultPolicy, resolvePolicy, MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS, type Policy } from './options.js';
export { Keys, type UserKeys } from './keys.js';
export { SLOT_COUNT, slotOf, slotTags } from './slots.js';
export { withTimeout } from './timeout.js';
export {
  Scripts,
  loadScripts,
  scriptNames,
  defaultScriptsDir,
  isUnavailable,
  wrapRedisError,
  type RedisClient,
  type ScriptName,
  type ScriptSource,
  type ReplicaWait,
} from './scripts.js';
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
  createToken,
  parseToken,
  encodeMetadata,
  TOKEN_SECRET_BYTES,
  type Metadata,
  type ParsedToken,
  type IssueOptions,
  type IssueOutcome,
  type ConsumeOutcome,
} from './tokens.js';
export * from './limiters/index.js';
export { LeaseManager, type Lease, type LeaseRenewAnswer, type AcquireOptions, type AcquireOutcome } from './lease.js';
export { Keepalive, LeaseLostError, type KeepaliveOptions, type RenewAnswer } from './keepalive.js';
export { SessionStore, type ClaimOptions, type SessionRenewAnswer } from './sessions.js';
export * from './session-types.js';
export { Sweeper, type SweeperOptions, type SweepResult } from './sweeper.js';
export { USER_ID_PATTERN, assertUserId } from './validate.js';
export { WorkerRegistry, type WorkerHeartbeat, type WorkerRecord } from './workers.js';
export { readIndex, type IndexSnapshot, type IndexedUser, type RecentEnding } from './live-index.js';
