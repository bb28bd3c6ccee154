export * from './schemas.js';
export { apiErrors, statusOfCoordinatorCode, type ApiErrorCode, type ErrorBody } from './errors.js';
export type {
  Admission,
  EndedSession,
  IssueTokenRequest,
  IssuedToken,
  LiveSession,
  SessionState,
  StopAccepted,
} from './types.js';
