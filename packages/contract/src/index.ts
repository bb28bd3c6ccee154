export * from './schemas.js';
export {
  finalEventTypes,
  isFinalEventType,
  sessionEventTypes,
  type FinalEventType,
  type SessionEventType,
} from './events.js';
export { apiErrors, type ApiErrorCode, type ErrorBody } from './errors.js';
export * from './vocabulary.js';
export { labelProblem, labelsProblem } from './labels.js';
export type {
  Admission,
  CreatedWebhook,
  Deliveries,
  WebhookData,
  EndedSession,
  Host,
  Hosts,
  Pool,
  Pools,
  IssueTokenRequest,
  IssuedToken,
  LiveSession,
  OutputEndData,
  OutputLineData,
  SessionEventData,
  SessionLogs,
  SessionState,
  SetLifetimeRequest,
  UpdateSessionRequest,
  ListSessionsQuery,
  SessionsPage,
  SessionById,
  BulkStopRequest,
  BulkStopAccepted,
  StopAccepted,
  StreamErrorData,
  Whoami,
  Scope,
  ConnectRequest,
  Connect,
} from './types.js';
