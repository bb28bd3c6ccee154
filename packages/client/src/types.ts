// The API's request and answer shapes, from the contract package (type-only: the client's one runtime
// dependency is the SSE parser).
export type {
  Admission,
  CreatedWebhook,
  Deliveries,
  ApiErrorCode,
  EndedSession,
  Host,
  Hosts,
  IssueTokenRequest,
  IssuedToken,
  LiveSession,
  OutputLineData,
  SessionEventData,
  SessionLogs,
  SessionState,
  StopAccepted,
  StreamErrorData,
  WebhookData,
} from '@cq/contract';
