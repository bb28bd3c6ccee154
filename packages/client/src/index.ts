export { CoordinatorClient, type ClientOptions, type EventsOptions, type StreamedEvent } from './client.js';
export {
  ApiError,
  LifetimeTooLongError,
  NoCapacityError,
  NoHostError,
  NoSessionError,
  NoWebhookError,
  SessionExistsError,
  ThrottledError,
  TokenInvalidError,
  UnauthorizedError,
  UnavailableError,
  WebhookUrlForbiddenError,
  toApiError,
} from './errors.js';
export type * from './types.js';
