export { CoordinatorClient, type ClientOptions, type EventsOptions, type StreamedEvent } from './client.js';
export {
  ApiError,
  LifetimeTooLongError,
  NoCapacityError,
  NoHostError,
  NoSessionError,
  SessionExistsError,
  ThrottledError,
  TokenInvalidError,
  UnauthorizedError,
  UnavailableError,
  toApiError,
} from './errors.js';
export type * from './types.js';
