// The shapes of the API's requests and answers, inferred from the schemas: the client and the CLI use
// these (type-only imports, so they carry no runtime dependency).
import type { z } from 'zod';
import type {
  bulkStopAccepted,
  bulkStopBody,
  deliveriesView,
  listSessionsQuery,
  sessionByIdView,
  sessionsPage,
  webhookCreated,
  webhookView,
  historyView,
  hostView,
  hostsView,
  poolsView,
  whoamiView,
  connectRequest,
  connectResponse,
  commandRequest,
  commandResult,
  issueTokenBody,
  outputEndData,
  outputLine,
  sessionEventData,
  sessionLogs,
  sessionView,
  setLifetimeBody,
  spawnAdmitted,
  streamErrorData,
  stopAccepted,
  tokenIssued,
} from './schemas.js';

/** States of a session (see the contract). */
export type SessionState = z.infer<typeof sessionView>['state'] | EndedSession['state'];
/** `POST /v1/tokens` body. */
export type IssueTokenRequest = z.input<typeof issueTokenBody>;
/** `201` of `POST /v1/tokens`. */
export type IssuedToken = z.infer<typeof tokenIssued>;
/** `202` of `POST /v1/spawn`. */
export type Admission = z.infer<typeof spawnAdmitted>;
/** `200` of `GET /v1/users/{userId}/session`. */
export type LiveSession = z.infer<typeof sessionView>;
/** `PATCH /v1/users/{userId}/session` body: new labels (merged; null removes), a new lifetime, or both. */
export type SetLifetimeRequest = z.input<typeof setLifetimeBody>;
/** `PATCH /v1/users/{userId}/session` body (the same as {@link SetLifetimeRequest}). */
export type UpdateSessionRequest = SetLifetimeRequest;
/** The query of `GET /v1/sessions`. */
export type ListSessionsQuery = z.input<typeof listSessionsQuery>;
/** `200` of `GET /v1/sessions`. */
export type SessionsPage = z.infer<typeof sessionsPage>;
/** `200` of `GET /v1/sessions/{sessionId}`: the live session, or its history entry with its user. */
export type SessionById = z.infer<typeof sessionByIdView>;
/** `POST /v1/sessions/stop` body: the list's filters, at least one. */
export type BulkStopRequest = z.input<typeof bulkStopBody>;
/** `202` of `POST /v1/sessions/stop`. */
export type BulkStopAccepted = z.infer<typeof bulkStopAccepted>;
/** `202` of `DELETE /v1/users/{userId}/session`. */
export type StopAccepted = z.infer<typeof stopAccepted>;
/** One entry of `GET /v1/users/{userId}/history`. */
export type EndedSession = z.infer<typeof historyView>['sessions'][number];
/** One worker host of `GET /v1/hosts`. */
export type Host = z.infer<typeof hostView>;
/** `200` of `GET /v1/hosts`. */
export type Hosts = z.infer<typeof hostsView>;
/** `200` of `GET /v1/pools`. */
export type Pools = z.infer<typeof poolsView>;
/** One pool of `GET /v1/pools`. */
export type Pool = Pools['pools'][number];

/** The `data` of a session event (SSE `event` is its `type`). */
export type SessionEventData = z.infer<typeof sessionEventData>;

/** The `data` of an SSE `error` event. */
export type StreamErrorData = z.infer<typeof streamErrorData>;

/** One line of a session's output, as `GET /v1/users/{userId}/sessions/{sessionId}/logs` answers it. */
export type OutputLineData = z.infer<typeof outputLine>;

/** The `data` of the SSE `end` event of a session's output. */
export type OutputEndData = z.infer<typeof outputEndData>;

/** A page of a session's output. */
export type SessionLogs = z.infer<typeof sessionLogs>;

/** A webhook as `GET /v1/webhooks` lists it. */
export type WebhookData = z.infer<typeof webhookView>;

/** A webhook just created, with its secret (shown only then). */
export type CreatedWebhook = z.infer<typeof webhookCreated>;

/** A webhook's delivery attempts. */
export type Deliveries = z.infer<typeof deliveriesView>['deliveries'];
/** `200` of `GET /v1/whoami`. */
export type Whoami = z.infer<typeof whoamiView>;
/** A scope a key may hold. */
export type Scope = Whoami['scopes'][number];
export type ConnectRequest = z.infer<typeof connectRequest>;
export type Connect = z.infer<typeof connectResponse>;
/** `POST /v1/sessions/{sessionId}/commands` body. */
export type CommandRequest = z.input<typeof commandRequest>;
/** `200` of `POST /v1/sessions/{sessionId}/commands`. */
export type CommandResult = z.infer<typeof commandResult>;
