import type { CoordinatorClient, ProxyConnection, StreamedEvent } from './client.js';
import type { EventsOptions } from './options.js';
import type { ExecOptions, ExecStream } from './exec.js';
import { ApiError, NoSessionError, SessionEndedError, TimeoutError } from './errors.js';
import type {
  CommandRequest,
  CommandResult,
  ConnectRequest,
  EndedSession,
  IssueTokenRequest,
  LiveSession,
  OutputLineData,
  SessionById,
  SessionEventData,
  SessionLogs,
  StopAccepted,
} from './wire.js';

/** Options of {@link CoordinatorClient.start}: the token's fields, and what to wait for. */
export interface StartOptions extends IssueTokenRequest {
  /**
   * Resolve once the session runs (`running`), or once it announced it is ready (`ready`, with its
   * `endpoint`).
   * @defaultValue 'running'
   */
  waitFor?: 'running' | 'ready';
  /**
   * Longest wait, ms, from the token to the state waited for. Past it the session is stopped (it would
   * otherwise run on with nobody holding it) and {@link TimeoutError} thrown.
   * @defaultValue 60000
   */
  timeoutMs?: number;
  /** Gives up the wait (the session is stopped, as on a timeout). */
  signal?: AbortSignal;
}

/** What the handle knows of its session: the state it was in when last seen. */
export interface SessionSnapshot {
  readonly state: SessionEventData['type'];
  /** Where the session said it can be reached (once `ready`). */
  readonly endpoint?: string | undefined;
  readonly workerId?: string | undefined;
  /** When its lifetime runs out (once running). */
  readonly deadline?: string | undefined;
}

/**
 * One session, as {@link CoordinatorClient.start} admitted it (or {@link CoordinatorClient.session}
 * found it): its ids and every call about it. Each call names the session, so a call that comes after
 * it ended never touches the user's next one ({@link SessionMismatchError} instead).
 */
export class Session {
  readonly #client: CoordinatorClient;
  readonly userId: string;
  readonly sessionId: string;
  readonly fence: number;
  readonly pool: string;
  #snapshot: SessionSnapshot;

  /** @internal */
  constructor(
    client: CoordinatorClient,
    ids: { userId: string; sessionId: string; fence: number; pool: string },
    snapshot: SessionSnapshot,
  ) {
    this.#client = client;
    this.userId = ids.userId;
    this.sessionId = ids.sessionId;
    this.fence = ids.fence;
    this.pool = ids.pool;
    this.#snapshot = snapshot;
  }

  /** The state it was in when last seen (by {@link start}, {@link refresh} or {@link wait}). */
  get snapshot(): SessionSnapshot {
    return this.#snapshot;
  }

  /** Where it said it can be reached, once ready. */
  get endpoint(): string | undefined {
    return this.#snapshot.endpoint;
  }

  /** `GET /v1/sessions/{sessionId}`: the session as it is now, live or ended. */
  async refresh(): Promise<SessionById> {
    const now = await this.#client.getSession({ sessionId: this.sessionId });
    this.#snapshot =
      'endedAt' in now
        ? { state: now.state, workerId: now.workerId }
        : {
            state: now.state === 'running' && now.ready ? 'ready' : now.state,
            endpoint: now.endpoint,
            workerId: now.workerId,
            deadline: now.deadline,
          };
    return now;
  }

  /** A page of its kept output (see {@link CoordinatorClient.logs}). */
  logs(options: { after?: string; limit?: number } = {}): Promise<SessionLogs> {
    return this.#client.logs(this.userId, this.sessionId, options);
  }

  /** Its output, kept lines then new ones, until it ended (see {@link CoordinatorClient.followLogs}). */
  followLogs(options: Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'> = {}): AsyncGenerator<OutputLineData> {
    return this.#client.followLogs(this.userId, this.sessionId, options);
  }

  /** It now ends `lifetimeMs` from now (sooner or later than before); answers it as it is now. */
  setLifetime(lifetimeMs: number): Promise<LiveSession> {
    return this.#client.extend(this.userId, lifetimeMs, { sessionId: this.sessionId });
  }

  /** Merges `labels` into its labels (`null` removes one); answers it as it is now. */
  setLabels(labels: Record<string, string | null>): Promise<LiveSession> {
    return this.#client.updateSession(this.userId, { labels }, { sessionId: this.sessionId });
  }

  /**
   * A connect URL for one of its ports (default: the one it announced as ready), and the token a program
   * sends as `CQ-Connect-Token`: see {@link CoordinatorClient.connect}.
   */
  connect(request: ConnectRequest = {}): Promise<ProxyConnection> {
    return this.#client.connect(this.sessionId, request);
  }

  /** It is in use: its idle clock starts again. */
  /** Commands inside the session ({@link CoordinatorClient.runCommand}). */
  get commands(): { run(argv: string[], options?: Omit<CommandRequest, 'argv'>): Promise<CommandResult> } {
    return { run: (argv, options = {}) => this.#client.runCommand(this.sessionId, { ...options, argv }) };
  }

  /** Its files, as the session sees them ({@link CoordinatorClient.readFile}, {@link CoordinatorClient.writeFile}). */
  get files(): {
    read(path: string, options?: { signal?: AbortSignal }): Promise<ReadableStream<Uint8Array>>;
    write(
      path: string,
      body: string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
      options?: { signal?: AbortSignal },
    ): Promise<void>;
  } {
    return {
      read: (path, options) => this.#client.readFile(this.sessionId, path, options),
      write: (path, body, options) => this.#client.writeFile(this.sessionId, path, body, options),
    };
  }

  /** A command (a terminal with `tty: true`) inside the session as a duplex stream ({@link CoordinatorClient.exec}). */
  exec(options: ExecOptions = {}): Promise<ExecStream> {
    return this.#client.exec(this.sessionId, options);
  }

  recordActivity(): Promise<void> {
    return this.#client.recordActivity(this.userId, { sessionId: this.sessionId });
  }

  /** Stops it (`stopping`; a pending one `stopped` at once). */
  stop(): Promise<StopAccepted> {
    return this.#client.stopSession(this.userId, { sessionId: this.sessionId });
  }

  /**
   * Waits until it has ended and answers its history entry (how it ended, its exit code). Throws
   * {@link TimeoutError} after `timeoutMs` (the session runs on).
   */
  async wait(options: { timeoutMs?: number; signal?: AbortSignal } = {}): Promise<EndedSession> {
    const controller = new AbortController();
    const timer =
      options.timeoutMs === undefined
        ? undefined
        : setTimeout(() => controller.abort(new Error('timeout')), options.timeoutMs);
    const abort = (): void => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', abort, { once: true });
    try {
      let opened!: () => void;
      const open = new Promise<void>((resolve) => (opened = resolve));
      const events = this.#client.events({ userId: this.userId, signal: controller.signal, onOpen: () => opened() });
      const first = events.next();
      // Subscribed before looking: an end between the look and the stream is in the stream.
      await Promise.race([open, first]);
      const ended = await this.#ended();
      if (ended !== undefined) return ended;
      for (let next = await first; !next.done; next = await events.next()) {
        const event = next.value;
        if (event.type === 'error' || event.sessionId !== this.sessionId) continue;
        this.#snapshot = { ...this.#snapshot, state: event.type };
        if (event.type === 'withdrawn' || FINAL.has(event.type)) {
          const entry = await this.#ended();
          if (entry !== undefined) return entry;
        }
      }
      if (controller.signal.aborted && options.signal?.aborted !== true)
        throw new TimeoutError(
          0,
          'timeout',
          `The session ${this.sessionId} did not end within ${options.timeoutMs} ms.`,
          undefined,
        );
      // The user's stream ended without this session's end: it ended before the stream opened.
      const entry = await this.#ended();
      if (entry !== undefined) return entry;
      throw new NoSessionError(
        404,
        'no_session',
        `The session ${this.sessionId} is neither live nor kept in history.`,
        undefined,
      );
    } finally {
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', abort);
      controller.abort();
    }
  }

  /** Its history entry when it has ended, else undefined. */
  async #ended(): Promise<EndedSession | undefined> {
    try {
      const now = await this.refresh();
      return 'endedAt' in now ? now : undefined;
    } catch (err) {
      if (err instanceof NoSessionError) return undefined;
      throw err;
    }
  }
}

const FINAL: ReadonlySet<string> = new Set(['completed', 'failed', 'expired', 'stopped', 'lost']);

/**
 * Issues a token, spawns with it and waits until the session runs (or is ready): see
 * {@link CoordinatorClient.start}. The user's stream is opened before the spawn, so no change is missed.
 */
export async function startSession(client: CoordinatorClient, options: StartOptions): Promise<Session> {
  const { waitFor = 'running', timeoutMs = 60_000, signal, ...request } = options;
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new Error('timeout')), timeoutMs);
  const abort = (): void => controller.abort(signal?.reason);
  signal?.addEventListener('abort', abort, { once: true });
  let admitted: { sessionId: string; fence: number } | undefined;
  try {
    const token = await client.issueToken(request);
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const events = client.events({ userId: request.userId, signal: controller.signal, onOpen: () => opened() });
    const first = events.next();
    await Promise.race([open, first.then(() => undefined)]);
    const admission = await client.spawn(token.token);
    admitted = admission;
    for (let next = await first; !next.done; next = await events.next()) {
      const event: StreamedEvent = next.value;
      // The user's earlier session (its end may still come) or another stream's error event: not ours.
      if (event.type === 'error' || event.sessionId !== admission.sessionId) continue;
      if (event.type === 'withdrawn' || FINAL.has(event.type)) throw new SessionEndedError(event);
      const reached =
        waitFor === 'running' ? event.type === 'running' || event.type === 'ready' : event.type === 'ready';
      if (reached)
        return new Session(
          client,
          { userId: admission.userId, sessionId: admission.sessionId, fence: admission.fence, pool: event.pool },
          {
            state: event.type,
            workerId: event.workerId,
            ...(event.type === 'ready' ? { endpoint: event.endpoint } : {}),
            ...(event.type === 'running' ? { deadline: event.deadline } : {}),
          },
        );
      if (event.type === 'stopping') continue;
    }
    throw new TimeoutError(
      0,
      'timeout',
      signal?.aborted === true
        ? 'The wait was given up.'
        : `The session did not reach ${waitFor} within ${timeoutMs} ms${admitted === undefined ? '' : `; it was stopped`}.`,
      undefined,
    );
  } catch (err) {
    // Given up (timeout, abort, a broken stream): the session is stopped, else it would run on unheld.
    if (admitted !== undefined && !(err instanceof SessionEndedError))
      await client.stopSession(request.userId, { sessionId: admitted.sessionId }).catch((): void => undefined);
    if (err instanceof ApiError) throw err;
    if (controller.signal.aborted)
      throw new TimeoutError(0, 'timeout', `The session did not reach ${waitFor} within ${timeoutMs} ms.`, undefined);
    throw err;
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener('abort', abort);
    controller.abort();
  }
}
