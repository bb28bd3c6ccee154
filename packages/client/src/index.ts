export {
  CoordinatorClient,
  type ClientOptions,
  type EventsOptions,
  type SessionListFilter,
  type SessionMatchOptions,
  type StreamedEvent,
} from './client.js';
export { Session, type SessionSnapshot, type StartOptions } from './session.js';
export * from './errors.js';
export type * from './types.js';
