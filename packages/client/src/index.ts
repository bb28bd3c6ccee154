export { CoordinatorClient, type ProxyConnection, type StreamedEvent } from './client.js';
export type { ClientOptions, EventsOptions, SessionListFilter, SessionMatchOptions } from './options.js';
export { Session, type SessionSnapshot, type StartOptions } from './session.js';
export * from './errors.js';
export type * from './types.js';
export type { ExecExit, ExecOptions, ExecStream } from './exec.js';
