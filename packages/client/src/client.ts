import { EventSourceParserStream } from 'eventsource-parser/stream';
import { ApiError, NoSessionError, UnavailableError, toApiError } from './errors.js';
import { Session, startSession, type StartOptions } from './session.js';
import type {
  Admission,
  BulkStopAccepted,
  BulkStopRequest,
  SessionById,
  SessionsPage,
  UpdateSessionRequest,
  CreatedWebhook,
  Deliveries,
  EndedSession,
  Host,
  Hosts,
  IssueTokenRequest,
  Pool,
  Pools,
  IssuedToken,
  LiveSession,
  OutputLineData,
  SessionEventData,
  SessionLogs,
  StopAccepted,
  StreamErrorData,
  WebhookData,
  Whoami,
  SessionEventType,
} from './types.js';

/** One item of an event stream: a session event (with its id), or the stream's error event. */
export type StreamedEvent =
  (SessionEventData & { readonly id?: string }) | ({ readonly type: 'error' } & StreamErrorData);

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
}

/** The process's environment where there is one (Node), else nothing (a browser). */
function environment(name: string): string | undefined {
  const value = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
  return value === undefined || value === '' ? undefined : value;
}

/** Waits `ms`, or less when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
    function done(): void {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
  });
}

/** An SSE message as the parser gives it. */
interface Message {
  event?: string | undefined;
  id?: string | undefined;
  data: string;
}

/** Order of a session's states in a user's stream: an event that does not move past what was seen is not news. */
function rankOf(type: SessionEventData['type']): number {
  return type === 'pending' ? 0 : type === 'running' ? 1 : type === 'ready' ? 2 : type === 'stopping' ? 3 : 4;
}

const FINAL_TYPES: ReadonlySet<string> = new Set(['completed', 'failed', 'expired', 'stopped', 'lost']);

/**
 * A typed client of the HTTP API. Error answers are thrown as typed errors, one class per error code
 * ({@link ThrottledError} with `retryAfterMs`, {@link SessionExistsError} with `sessionId`, ...), all
 * subclasses of {@link ApiError}. Streams reconnect by themselves and resume after their last event.
 */
export class CoordinatorClient {
  readonly #baseUrl: string;
  readonly #apiKey: string | undefined;
  readonly #timeoutMs: number;
  readonly #reconnectForMs: number;

  constructor(options: ClientOptions = {}) {
    this.#baseUrl = (options.baseUrl ?? environment('CQ_API_URL') ?? 'http://127.0.0.1:3000').replace(/\/+$/, '');
    this.#apiKey = options.apiKey ?? environment('CQ_API_KEY');
    this.#timeoutMs = options.timeoutMs ?? 10_000;
    this.#reconnectForMs = options.reconnectForMs ?? 60_000;
  }

  /** Where this client sends its requests. */
  get baseUrl(): string {
    return this.#baseUrl;
  }

  /**
   * Server-sent session events as an async iterator: every session's (`GET /v1/events`), or, with
   * `userId`, the user's current state and then each change until the session ends (a `withdrawn`
   * admission is followed by the user's next session). A stream that breaks (the API restarted, a proxy
   * cut it) reconnects by itself with `Last-Event-ID` and goes on after its last event, each event
   * once; it throws {@link UnavailableError} `stream_closed` when it could not reconnect within
   * `reconnectForMs`. The iterator ends when the user's session ends, or when `signal` aborts.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<StreamedEvent> {
    const { userId } = options;
    const path = userId === undefined ? '/v1/events' : `/v1/users/${encodeURIComponent(userId)}/session/events`;
    // A user's stream resumed after its first event (the state read when it opened) may send again a
    // change that state already showed: what does not move the session past what was seen is left out.
    let seen: { fence: number; rank: number; endpoint: string | undefined } | undefined;
    for await (const message of this.#follow(
      path,
      options,
      (m) => userId !== undefined && FINAL_TYPES.has(m.event ?? ''),
    )) {
      const data = JSON.parse(message.data) as Record<string, unknown>;
      if (message.event === 'error') {
        yield { ...(data as unknown as StreamErrorData), type: 'error' };
        continue;
      }
      const event = data as unknown as SessionEventData;
      if (userId !== undefined) {
        const rank = rankOf(event.type);
        const endpoint = event.type === 'ready' ? event.endpoint : undefined;
        if (
          seen !== undefined &&
          (event.fence < seen.fence ||
            (event.fence === seen.fence && (rank < seen.rank || (rank === seen.rank && endpoint === seen.endpoint))))
        )
          continue;
        seen = event.type === 'withdrawn' ? undefined : { fence: event.fence, rank, endpoint };
      }
      yield { ...event, ...(message.id === undefined ? {} : { id: message.id }) };
    }
  }

  /**
   * `GET /v1/users/{userId}/sessions/{sessionId}/logs`: a page of a session's kept output, oldest first
   * (`after`: the lines after this id; `limit`: 1 to 1000). Throws {@link NoSessionError} when no such
   * session's output is kept.
   */
  logs(userId: string, sessionId: string, options: { after?: string; limit?: number } = {}): Promise<SessionLogs> {
    return this.#request('GET', `${logsPath(userId, sessionId)}${queryString(options)}`);
  }

  /**
   * A session's output followed as server-sent events: every kept line (after `lastEventId`, a line's
   * `id`), then each new one; the iterator ends after the session has ended and its last line was sent
   * (or when `signal` aborts). A stream that breaks reconnects by itself after its last line, each line
   * once; it throws {@link UnavailableError} `stream_closed` when it could not within `reconnectForMs`.
   */
  async *followLogs(
    userId: string,
    sessionId: string,
    options: Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'> = {},
  ): AsyncGenerator<OutputLineData> {
    for await (const message of this.#follow(logsPath(userId, sessionId), options, (m) => m.event === 'end')) {
      if (message.event === 'line') yield JSON.parse(message.data) as OutputLineData;
    }
  }

  /**
   * A stream that survives its connection: reconnects (backing off from 100 ms to 2 s) with the last id
   * it got as `Last-Event-ID` whenever the stream breaks or ends before `isEnd` says so, until `signal`
   * aborts; gives up with `stream_closed` after `reconnectForMs` without an open stream. An error answer
   * of the API that a retry cannot change (4xx) is thrown at once.
   */
  async *#follow(
    path: string,
    options: Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'>,
    isEnd: (message: Message) => boolean,
  ): AsyncGenerator<Message> {
    let lastEventId = options.lastEventId;
    let brokenSince: number | undefined;
    let delay = 100;
    let opened = false;
    let why = 'it ended';
    for (;;) {
      try {
        const stream = this.#stream(path, {
          ...(lastEventId === undefined ? {} : { lastEventId }),
          ...(options.signal === undefined ? {} : { signal: options.signal }),
          onOpen: () => {
            brokenSince = undefined;
            delay = 100;
            if (!opened) options.onOpen?.();
            opened = true;
          },
        });
        for await (const message of stream) {
          if (message.id !== undefined && message.id !== '') lastEventId = message.id;
          yield message;
          if (isEnd(message)) return;
        }
        why = 'it ended before its end was sent';
      } catch (err) {
        if (options.signal?.aborted === true) return;
        if (err instanceof ApiError && err.status >= 400 && err.status < 500) throw err;
        why = err instanceof Error ? err.message : String(err);
      }
      if (options.signal?.aborted === true) return;
      brokenSince ??= Date.now();
      if (Date.now() - brokenSince > this.#reconnectForMs)
        throw new UnavailableError(
          0,
          'stream_closed',
          `The stream ${path} broke (${why}) and could not be reopened within ${this.#reconnectForMs} ms` +
            `${lastEventId === undefined ? '' : `; resume with lastEventId ${lastEventId}`}.`,
          undefined,
        );
      await pause(delay, options.signal);
      delay = Math.min(2000, delay * 2);
    }
  }

  /** Opens a server-sent event stream and yields its messages until it ends or `signal` aborts. */
  async *#stream(
    path: string,
    options: Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'>,
  ): AsyncGenerator<Message> {
    const headers: Record<string, string> = { accept: 'text/event-stream' };
    if (this.#apiKey !== undefined) headers['authorization'] = `Bearer ${this.#apiKey}`;
    if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
    const controller = new AbortController();
    const abort = (): void => controller.abort(options.signal?.reason);
    options.signal?.addEventListener('abort', abort, { once: true });
    const opening = setTimeout(() => controller.abort(new Error('the stream did not open in time')), this.#timeoutMs);
    let response: Response;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, { headers, signal: controller.signal });
    } catch (err) {
      options.signal?.removeEventListener('abort', abort);
      if (options.signal?.aborted) return;
      throw new UnavailableError(
        0,
        'unreachable',
        `The API at ${this.#baseUrl} could not be reached: ${(err as Error).message}`,
        undefined,
      );
    } finally {
      clearTimeout(opening);
    }
    try {
      if (!response.ok || response.body === null) {
        const text = await response.text();
        let parsed: unknown = text;
        try {
          parsed = JSON.parse(text);
        } catch {
          // not JSON: passed on as text
        }
        throw toApiError(response.status, parsed, response.headers);
      }
      options.onOpen?.();
      yield* response.body.pipeThrough(new TextDecoderStream()).pipeThrough(new EventSourceParserStream());
    } catch (err) {
      if (!options.signal?.aborted) throw err;
    } finally {
      options.signal?.removeEventListener('abort', abort);
      controller.abort();
    }
  }

  async #request<T>(method: string, path: string, body?: unknown, auth = true): Promise<T> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (auth && this.#apiKey !== undefined) headers['authorization'] = `Bearer ${this.#apiKey}`;
    let response: Response;
    try {
      response = await fetch(`${this.#baseUrl}${path}`, {
        method,
        headers,
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
    } catch (err) {
      throw new UnavailableError(
        0,
        'unreachable',
        `The API at ${this.#baseUrl} could not be reached: ${(err as Error).message}`,
        undefined,
      );
    }
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = text === '' ? undefined : JSON.parse(text);
    } catch {
      parsed = text;
    }
    if (!response.ok) throw toApiError(response.status, parsed, response.headers);
    return parsed as T;
  }

  /**
   * One call to a running session: issues a token (the options are its fields), spawns with it and
   * resolves once the session runs (or, with `waitFor: 'ready'`, once it announced it is ready), as a
   * {@link Session} handle. Rejects with the typed error of a refusal ({@link ThrottledError},
   * {@link SessionExistsError}, {@link NoCapacityError}, ...), with {@link SessionEndedError} when the
   * session ended (or was withdrawn) first, and with {@link TimeoutError} after `timeoutMs` (then the
   * session is stopped).
   */
  start(options: StartOptions): Promise<Session> {
    return startSession(this, options);
  }

  /** A handle on an existing session, by its id (live, or ended and still in its user's history). */
  async session(sessionId: string): Promise<Session> {
    const found = await this.getSession({ sessionId });
    const handle = new Session(
      this,
      { userId: found.userId, sessionId: found.sessionId, fence: found.fence, pool: found.pool },
      { state: found.state },
    );
    await handle.refresh();
    return handle;
  }

  /** `POST /v1/tokens`: a one-time spawn token for a user. */
  issueToken(request: IssueTokenRequest): Promise<IssuedToken> {
    return this.#request('POST', '/v1/tokens', request);
  }

  /** `POST /v1/spawn`: admit a spawn with a token (no service key needed). */
  spawn(token: string): Promise<Admission> {
    return this.#request('POST', '/v1/spawn', { token }, false);
  }

  /**
   * The user's live session (`GET /v1/users/{userId}/session`), or, given `{ sessionId }`, a session by
   * its id, live or still in its user's history (`GET /v1/sessions/{sessionId}`). Throws
   * {@link NoSessionError} when there is none.
   */
  getSession(userId: string): Promise<LiveSession>;
  getSession(ref: { sessionId: string }): Promise<SessionById>;
  getSession(ref: string | { sessionId: string }): Promise<LiveSession | SessionById> {
    if (typeof ref === 'string') return this.#request('GET', `/v1/users/${encodeURIComponent(ref)}/session`);
    return this.#request('GET', `/v1/sessions/${encodeURIComponent(ref.sessionId)}`);
  }

  /**
   * `GET /v1/sessions`, page after page: the live sessions of every user that match `filter`, as an
   * async iterator over pages (a page may be empty with more to come; the iterator ends after the last).
   * A session live for the whole walk comes exactly once.
   */
  async *listSessions(
    filter: SessionListFilter = {},
    options: { limit?: number; signal?: AbortSignal } = {},
  ): AsyncGenerator<LiveSession[], void, undefined> {
    const query = new URLSearchParams();
    for (const name of ['state', 'pool', 'workerId', 'userId'] as const) {
      const value = filter[name];
      if (value !== undefined) query.set(name, value);
    }
    for (const [key, value] of Object.entries(filter.labels ?? {})) query.append('label', `${key}=${value}`);
    if (options.limit !== undefined) query.set('limit', String(options.limit));
    let cursor: string | undefined;
    do {
      options.signal?.throwIfAborted();
      const page: URLSearchParams = new URLSearchParams(query);
      if (cursor !== undefined) page.set('cursor', cursor);
      const text = page.toString();
      const answer: SessionsPage = await this.#request('GET', `/v1/sessions${text === '' ? '' : `?${text}`}`);
      yield answer.sessions;
      cursor = answer.next;
    } while (cursor !== undefined);
  }

  /**
   * `POST /v1/sessions/stop`: stops every live session `filter` matches (at least one filter), as
   * {@link stopSession} does, at most 1,000 per call: call again while `more` is true.
   */
  stopSessions(filter: SessionListFilter): Promise<BulkStopAccepted> {
    const { labels, ...rest } = filter;
    const body: BulkStopRequest = { ...rest, ...(labels === undefined ? {} : { labels: { ...labels } }) };
    return this.#request('POST', '/v1/sessions/stop', body);
  }

  /**
   * `PATCH /v1/users/{userId}/session`: new labels (merged into the session's; `null` removes a key),
   * a new lifetime, or both, all or nothing. Answers the session as it is now.
   */
  updateSession(userId: string, change: UpdateSessionRequest, options: SessionMatchOptions = {}): Promise<LiveSession> {
    return this.#request('PATCH', sessionPath(userId, '', options), change);
  }

  /** Like {@link getSession}, but undefined when the user has no live session. */
  async findSession(userId: string): Promise<LiveSession | undefined> {
    try {
      return await this.getSession(userId);
    } catch (err) {
      if (err instanceof NoSessionError) return undefined;
      throw err;
    }
  }

  /**
   * `PATCH /v1/users/{userId}/session`: a running session now ends `lifetimeMs` from now (sooner or
   * later than before); a pending one gets that lifetime once started. Answers the session with its
   * new `deadline`; throws {@link LifetimeTooLongError} (with `largestLifetimeMs`) beyond its start +
   * `MAX_LIFETIME_MS`, {@link NoSessionError} when there is none, {@link SessionMismatchError} when
   * `options.sessionId` is not the live session.
   */
  extend(userId: string, lifetimeMs: number, options: SessionMatchOptions = {}): Promise<LiveSession> {
    return this.#request('PATCH', sessionPath(userId, '', options), { lifetimeMs });
  }

  /**
   * `POST /v1/users/{userId}/session/activity`: the user's session is in use (e.g. its user is working),
   * so its idle clock starts again (see `idleTimeoutMs`); throws {@link NoSessionError} when the user
   * has no live session, {@link SessionMismatchError} when `options.sessionId` is not the live session.
   */
  async recordActivity(userId: string, options: SessionMatchOptions = {}): Promise<void> {
    await this.#request('POST', sessionPath(userId, '/activity', options));
  }

  /**
   * `DELETE /v1/users/{userId}/session`: stop the live session; throws {@link SessionMismatchError} when
   * `options.sessionId` is not the live session.
   */
  stopSession(userId: string, options: SessionMatchOptions = {}): Promise<StopAccepted> {
    return this.#request('DELETE', sessionPath(userId, '', options));
  }

  /** `GET /v1/users/{userId}/history`: ended sessions, newest first. */
  async history(userId: string): Promise<EndedSession[]> {
    const body = await this.#request<{ sessions: EndedSession[] }>(
      'GET',
      `/v1/users/${encodeURIComponent(userId)}/history`,
    );
    return body.sessions;
  }

  /** `GET /v1/whoami`: this client's key's name and scopes (never the key). */
  whoami(): Promise<Whoami> {
    return this.#request('GET', '/v1/whoami');
  }

  /** `GET /v1/hosts`: the live worker hosts and the free slots. */
  hosts(options: { pool?: string } = {}): Promise<Hosts> {
    return this.#request('GET', `/v1/hosts${queryString({ pool: options.pool })}`);
  }

  /** `GET /v1/pools`: every pool with a live host or a session waiting, with its slots, busy, free and pending. */
  async pools(): Promise<Pool[]> {
    return (await this.#request<Pools>('GET', '/v1/pools')).pools;
  }

  /**
   * `POST /v1/hosts/{workerId}/drain`: the host takes no new sessions, lets its running ones end, then
   * exits 0; throws {@link NoHostError} when no live host has this id.
   */
  drainHost(workerId: string): Promise<Host> {
    return this.#request('POST', `/v1/hosts/${encodeURIComponent(workerId)}/drain`);
  }

  /**
   * `POST /v1/webhooks`: a webhook receiving the session events of `events` (every type when absent);
   * the answer's `secret` (Standard Webhooks signing) is shown only here. Throws
   * {@link ApiError} `webhook_url_forbidden` for a URL that is not http(s) or resolves to a private address.
   */
  createWebhook(url: string, events?: readonly SessionEventType[]): Promise<CreatedWebhook> {
    return this.#request('POST', '/v1/webhooks', { url, ...(events === undefined ? {} : { events }) });
  }

  /** `GET /v1/webhooks`: every webhook, without secrets. */
  async webhooks(): Promise<WebhookData[]> {
    return (await this.#request<{ webhooks: WebhookData[] }>('GET', '/v1/webhooks')).webhooks;
  }

  /** `DELETE /v1/webhooks/{id}`: its deliveries stop, pending retries included. */
  async deleteWebhook(id: string): Promise<void> {
    await this.#request('DELETE', `/v1/webhooks/${encodeURIComponent(id)}`);
  }

  /** `GET /v1/webhooks/{id}/deliveries`: its delivery attempts, newest first. */
  async deliveries(id: string): Promise<Deliveries> {
    return (await this.#request<{ deliveries: Deliveries }>('GET', `/v1/webhooks/${encodeURIComponent(id)}/deliveries`))
      .deliveries;
  }

  /** `GET /readyz`: whether the API can reach Redis. */
  async ready(): Promise<boolean> {
    try {
      await this.#request('GET', '/readyz', undefined, false);
      return true;
    } catch (err) {
      if (err instanceof ApiError) return false;
      throw err;
    }
  }
}

/** `?name=value&…` of the parameters that are set; '' when none is. */
function queryString(params: Readonly<Record<string, string | number | undefined>>): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) if (value !== undefined) query.set(name, String(value));
  return query.size === 0 ? '' : `?${query.toString()}`;
}

/** The path of the user's session (`suffix`: a sub-resource such as `/activity`), with its precondition. */
function sessionPath(userId: string, suffix: string, options: SessionMatchOptions): string {
  return `/v1/users/${encodeURIComponent(userId)}/session${suffix}${queryString({ sessionId: options.sessionId })}`;
}

function logsPath(userId: string, sessionId: string): string {
  return `/v1/users/${encodeURIComponent(userId)}/sessions/${encodeURIComponent(sessionId)}/logs`;
}
