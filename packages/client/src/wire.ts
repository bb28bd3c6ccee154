// The API's request and answer shapes as plain types: the client depends on no package for them. They
// are the contract's (packages/contract, the zod schemas the API validates with), checked against it by
// src/wire.check.ts at every typecheck, and tighter where the contract's JSON cannot say more (the event
// data is a union discriminated by `type`).

/** The states of a live session. */
export type LiveState = 'pending' | 'running' | 'stopping';

/** How a session ended. */
export type EndState = 'completed' | 'failed' | 'expired' | 'stopped' | 'lost';

/** A session's state: live or ended. */
export type SessionState = LiveState | EndState;

/** Why a session ended, where known (`lost`: the first three; `failed`: `out_of_memory`; `stopped`: `idle`). */
export type TerminalReason = 'host_lost' | 'not_claimed' | 'state_lost' | 'out_of_memory' | 'idle';

/** The type of a session event: the state the session entered, `ready`, or `withdrawn` (its admission was rolled back). */
export type SessionEventType = LiveState | 'ready' | EndState | 'withdrawn';

/** What a key may do (`admin`: everything). */
export type Scope =
  | 'tokens:write'
  | 'sessions:read'
  | 'sessions:write'
  | 'sessions:connect'
  | 'sessions:exec'
  | 'hosts:read'
  | 'hosts:write'
  | 'webhooks:read'
  | 'webhooks:write'
  | 'dashboard'
  | 'dashboard:act'
  | 'admin';

/** Every error code the API answers with. */
export type ApiErrorCode =
  | 'invalid_request'
  | 'invalid_json'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'method_not_allowed'
  | 'request_timeout'
  | 'payload_too_large'
  | 'uri_too_long'
  | 'unsupported_media_type'
  | 'token_invalid'
  | 'session_exists'
  | 'throttled'
  | 'no_session'
  | 'no_host'
  | 'no_webhook'
  | 'webhook_url_forbidden'
  | 'lifetime_too_long'
  | 'session_stopping'
  | 'session_mismatch'
  | 'no_capacity'
  | 'unavailable'
  | 'session_starting'
  | 'port_closed'
  | 'host_unreachable'
  | 'proxy_busy'
  | 'proxy_not_configured'
  | 'command_timeout'
  | 'path_forbidden'
  | 'no_file'
  | 'file_too_large'
  | 'no_space'
  | 'internal';

/** `POST /v1/tokens` body. */
export interface IssueTokenRequest {
  userId: string;
  /** Passed to the session (`SESSION_METADATA`), at most 32 levels deep. */
  metadata?: Record<string, unknown> | undefined;
  /** How long the token stays valid, ms. */
  ttlMs?: number | undefined;
  /** The session's lifetime once started, ms (at most `MAX_LIFETIME_MS`). */
  lifetimeMs?: number | undefined;
  /** Stop the session after this long without activity, ms; 0 never. */
  idleTimeoutMs?: number | undefined;
  labels?: Record<string, string> | undefined;
  /** The pool of worker hosts that runs it. @defaultValue 'default' */
  pool?: string | undefined;
}

/** `201` of `POST /v1/tokens`. */
export interface IssuedToken {
  token: string;
  userId: string;
  expiresAt: string;
}

/** `202` of `POST /v1/spawn`. */
export interface Admission {
  sessionId: string;
  userId: string;
  fence: number;
  state: 'pending';
  lifetimeMs: number;
}

/** A live session, as `GET /v1/users/{userId}/session` shows it. */
export interface LiveSession {
  sessionId: string;
  userId: string;
  fence: number;
  state: LiveState;
  pool: string;
  labels: Record<string, string>;
  /** The session announced it is ready (at `endpoint`, when it said where). */
  ready: boolean;
  endpoint?: string | undefined;
  /** The port the session proxy opens by default, as the session announced it. */
  port?: number | undefined;
  workerId?: string | undefined;
  startedAt?: string | undefined;
  leaseExpiresAt?: string | undefined;
  /** When its lifetime runs out. */
  deadline?: string | undefined;
  idleTimeoutMs?: number | undefined;
  lastActivityAt?: string | undefined;
}

/** An ended session, as the user's history keeps it. */
export interface EndedSession {
  sessionId: string;
  fence: number;
  state: EndState;
  endedAt: string;
  pool: string;
  labels: Record<string, string>;
  reason?: TerminalReason | undefined;
  workerId?: string | undefined;
  startedAt?: string | undefined;
  exitCode?: number | undefined;
}

/** `GET /v1/sessions/{sessionId}`: live, or ended and still in its user's history. */
export type SessionById = LiveSession | (EndedSession & { userId: string });

/** `PATCH /v1/users/{userId}/session` body (at least one field). */
export interface UpdateSessionRequest {
  lifetimeMs?: number | undefined;
  /** Merged into the session's labels; `null` removes a key. */
  labels?: Record<string, string | null> | undefined;
}

/** `GET /v1/sessions` query. */
export interface ListSessionsQuery {
  state?: LiveState | undefined;
  pool?: string | undefined;
  workerId?: string | undefined;
  userId?: string | undefined;
  /** `key=value`, all must match. */
  label?: string | string[] | undefined;
  limit?: number | undefined;
  cursor?: string | undefined;
}

/** `200` of `GET /v1/sessions`. */
export interface SessionsPage {
  sessions: LiveSession[];
  /** The next page's cursor; absent on the last page. */
  next?: string | undefined;
}

/** `POST /v1/sessions/stop` body (at least one filter). */
export interface BulkStopRequest {
  state?: LiveState | undefined;
  pool?: string | undefined;
  workerId?: string | undefined;
  userId?: string | undefined;
  labels?: Record<string, string> | undefined;
}

/** `202` of `POST /v1/sessions/stop`. */
export interface BulkStopAccepted {
  matched: number;
  stopping: number;
  /** More may match: call again. */
  more: boolean;
}

/** `202` of `DELETE /v1/users/{userId}/session`. */
export interface StopAccepted {
  sessionId: string;
  userId: string;
  state: 'stopping' | 'stopped';
}

/** A live worker host. */
export interface Host {
  workerId: string;
  pool: string;
  state: 'active' | 'draining';
  slots: number;
  busy: number;
  heartbeatAt: string;
  startedAt: string;
  containment: 'namespace' | 'group';
  isolation: HostIsolation;
}

/**
 * How a worker host keeps its sessions apart from it and from each other: `network` `none` (loopback
 * only), `egress` (and public addresses) or `host`; `filesystem` `private` or `shared`; `cpus` the most
 * one session may use, null for no cap. A host with network `host` or filesystem `shared` does not
 * isolate that.
 */
export interface HostIsolation {
  network: 'none' | 'egress' | 'host';
  filesystem: 'private' | 'shared';
  cpus: number | null;
}

/** `200` of `GET /v1/hosts`. */
export interface Hosts {
  hosts: Host[];
  freeSlots: number;
}

/** A pool of worker hosts. */
export interface Pool {
  pool: string;
  hosts: number;
  slots: number;
  busy: number;
  free: number;
  pending: number;
}

/** `200` of `GET /v1/pools`. */
export interface Pools {
  pools: Pool[];
}

/** What every session event carries. */
interface EventBase {
  sessionId: string;
  userId: string;
  fence: number;
  /** When the change happened (Redis time). */
  at: string;
  pool: string;
  labels: Record<string, string>;
  workerId?: string | undefined;
}

/** Admitted: waits for a worker host. */
export interface PendingEvent extends EventBase {
  type: 'pending';
  /** The lifetime it will have once started, ms. */
  lifetimeMs?: number | undefined;
}

/** A worker host started it. */
export interface RunningEvent extends EventBase {
  type: 'running';
  /** When its lifetime runs out. */
  deadline?: string | undefined;
}

/** It announced it is ready, and where it can be reached. */
export interface ReadyEvent extends EventBase {
  type: 'ready';
  endpoint?: string | undefined;
  /** The port the session proxy opens by default, when it said. */
  port?: number | undefined;
}

/** A stop is under way. */
export interface StoppingEvent extends EventBase {
  type: 'stopping';
}

/** It ended: the last event of its stream. */
export interface EndedEvent extends EventBase {
  type: EndState;
  exitCode?: number | undefined;
  reason?: TerminalReason | undefined;
}

/** Its admission was rolled back (the spawn answered 503): it never was. */
export interface WithdrawnEvent extends EventBase {
  type: 'withdrawn';
}

/** The `data` of a session event (SSE and webhooks), discriminated by `type`. */
export type SessionEventData = PendingEvent | RunningEvent | ReadyEvent | StoppingEvent | EndedEvent | WithdrawnEvent;

/** The `data` of an SSE `error` event. */
export interface StreamErrorData {
  code: string;
  message: string;
}

/** One line of a session's output. */
export interface OutputLineData {
  /** Resume after it (`after`, `Last-Event-ID`). */
  id: string;
  at: string;
  stream: 'stdout' | 'stderr';
  line: string;
}

/** `200` of the logs route (JSON). */
export interface SessionLogs {
  lines: OutputLineData[];
  /** Bytes dropped by the output rate bound so far. */
  droppedBytes: number;
  more: boolean;
}

/** A webhook, without its secret. */
export interface WebhookData {
  id: string;
  url: string;
  /** The event types it receives; empty: all. */
  events: SessionEventType[];
  createdAt: string;
}

/** `201` of `POST /v1/webhooks`: the secret is shown only here. */
export interface CreatedWebhook extends WebhookData {
  secret: string;
}

/** A webhook's delivery attempts, newest first. */
export type Deliveries = Array<{
  eventId: string;
  type: SessionEventType;
  attempt: number;
  at: string;
  status?: number | undefined;
  error?: string | undefined;
  nextAttemptAt?: string | undefined;
}>;

/** `200` of `GET /v1/whoami`. */
export interface Whoami {
  name: string;
  scopes: Scope[];
}

/** `POST /v1/sessions/{sessionId}/connect` body. */
export interface ConnectRequest {
  /** The port to open (default: the session's ready port). */
  port?: number | undefined;
  /** How long the token lives, ms (default and most: until the session ends, at most 24 h). */
  ttlMs?: number | undefined;
}

/** `POST /v1/sessions/{sessionId}/commands` body. */
export interface CommandRequest {
  /** The program and its arguments (no shell: `["sh", "-c", "..."]` for one). */
  argv: string[];
  /** Given to the command, then closed (empty when absent). */
  stdin?: string | undefined;
  /** Variables over the session's own environment. */
  env?: Record<string, string> | undefined;
  /** The working directory as the session sees its files (default: its SESSION_DIR). */
  cwd?: string | undefined;
  /** Killed with its processes after this long, ms (default 60000). */
  timeoutMs?: number | undefined;
}

/** How a command inside a session ended, and what it printed (each output its first 1 MiB). */
export interface CommandResult {
  exitCode: number;
  signal?: string | undefined;
  stdout: string;
  stderr: string;
  truncated: boolean;
}

/** A connect URL: opens a session's port in a browser; `token` is for programs (`CQ-Connect-Token`). */
export interface Connect {
  url: string;
  token: string;
  port: number;
  expiresAt: string;
}
