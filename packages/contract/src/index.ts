export * from './schemas.js';
export { apiErrors, statusOfCoordinatorCode, type ApiErrorCode, type ErrorBody } from './errors.js';
export type {
  Admission,
  EndedSession,
  Host,
  Hosts,
  IssueTokenRequest,
  IssuedToken,
  LiveSession,
  SessionState,
  SetLifetimeRequest,
  StopAccepted,
} from './types.js';
