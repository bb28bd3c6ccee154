/** Options of {@link CoordinatorClient.events}. */
export interface EventsOptions {
  /** Only this user's current or next session (`/v1/users/{userId}/session/events`); the stream ends with it. */
  userId?: string;
  /** Resume after this event id (an `id` of an event this stream gave): the events after it, once. */
  lastEventId?: string;
  /** Ends the stream when it aborts. */
  signal?: AbortSignal;
  /** Called once the stream is first open (the server has subscribed it): from then on no change is missed. */
  onOpen?: () => void;
}

/** Options of the calls that change a user's session: `stopSession`, `extend`, `recordActivity`. */
export interface SessionMatchOptions {
  /**
   * The session meant: the call acts only when the user's live session is this one, else it throws
   * {@link SessionMismatchError} and nothing changes. Absent: whichever session is live.
   */
  sessionId?: string;
}

/** The filters of {@link CoordinatorClient.listSessions}: every one given must match. */
export interface SessionListFilter {
  state?: 'pending' | 'running' | 'stopping';
  pool?: string;
  workerId?: string;
  userId?: string;
  /** Labels the session must carry, each with this value. */
  labels?: Readonly<Record<string, string>>;
}

/** Options of {@link CoordinatorClient}. */
export interface ClientOptions {
  /**
   * Where the API listens, e.g. `http://127.0.0.1:3000`.
   * @defaultValue `CQ_API_URL` from the environment, else `http://127.0.0.1:3000`
   */
  baseUrl?: string;
  /**
   * A service key (needed for everything but `spawn`).
   * @defaultValue `CQ_API_KEY` from the environment
   */
  apiKey?: string;
  /**
   * Longest wait for one answer, or for a stream to open, ms.
   * @defaultValue 10000
   */
  timeoutMs?: number;
  /**
   * How long a broken stream (the API process restarted, a proxy cut it) keeps reconnecting before it
   * throws {@link UnavailableError} `stream_closed`, ms; each reconnection resumes after the last event.
   * @defaultValue 60000
   */
  reconnectForMs?: number;
  /**
   * The API's SSE heartbeat interval (it sends a comment line `: heartbeat` this often), ms. A stream that
   * receives nothing, not even a heartbeat, for twice this long while it waits for its next event is taken
   * for a dead connection (a peer gone without closing it) and reopened after its last event.
   * @defaultValue 15000 (the API's)
   */
  heartbeatMs?: number;
}

/** Every option with its value: {@link ClientOptions}, resolved. */
export interface ResolvedOptions {
  baseUrl: string;
  apiKey: string | undefined;
  timeoutMs: number;
  reconnectForMs: number;
  heartbeatMs: number;
}

/** The defaults of {@link ClientOptions} that do not come from the environment. */
export const DEFAULT_OPTIONS = {
  baseUrl: 'http://127.0.0.1:3000',
  timeoutMs: 10_000,
  reconnectForMs: 60_000,
  heartbeatMs: 15_000,
} as const;

/** The options given, else the environment's (`CQ_API_URL`, `CQ_API_KEY`), else the defaults. */
export function resolveOptions(options: ClientOptions): ResolvedOptions {
  return {
    baseUrl: (options.baseUrl ?? environment('CQ_API_URL') ?? DEFAULT_OPTIONS.baseUrl).replace(/\/+$/, ''),
    apiKey: options.apiKey ?? environment('CQ_API_KEY'),
    timeoutMs: options.timeoutMs ?? DEFAULT_OPTIONS.timeoutMs,
    reconnectForMs: options.reconnectForMs ?? DEFAULT_OPTIONS.reconnectForMs,
    heartbeatMs: positive(options.heartbeatMs, 'heartbeatMs') ?? DEFAULT_OPTIONS.heartbeatMs,
  };
}

/** `value` when it is a positive, finite number of ms; a RangeError naming the option otherwise. */
function positive(value: number | undefined, name: string): number | undefined {
  if (value !== undefined && !(Number.isFinite(value) && value > 0))
    throw new RangeError(`${name} must be a positive number of milliseconds, got ${value}`);
  return value;
}

/** The process's environment where there is one (Node), else nothing (a browser). */
function environment(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value === undefined || value === '' ? undefined : value;
}
