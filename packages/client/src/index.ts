export {
  CoordinatorClient,
  type ClientOptions,
  type EventsOptions,
  type SessionListFilter,
  type SessionMatchOptions,
  type StreamedEvent,
} from './client.js';
export {
  ApiError,
  ForbiddenError,
  LifetimeTooLongError,
  NoCapacityError,
  NoHostError,
  NoSessionError,
  NoWebhookError,
  SessionExistsError,
  SessionMismatchError,
  ThrottledError,
  TokenInvalidError,
  UnauthorizedError,
  UnavailableError,
  WebhookUrlForbiddenError,
  toApiError,
} from './errors.js';
export type * from './types.js';
