// The API's request and answer shapes, from the contract package (type-only: the client carries no
// runtime dependency).
export type {
  Admission,
  ApiErrorCode,
  EndedSession,
  Host,
  Hosts,
  IssueTokenRequest,
  IssuedToken,
  LiveSession,
  SessionState,
  StopAccepted,
} from '@cq/contract';
