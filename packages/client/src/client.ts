import { ApiError, NoSessionError, UnavailableError, toApiError } from './errors.js';
import {
  resolveOptions,
  type ClientOptions,
  type EventsOptions,
  type ResolvedOptions,
  type SessionListFilter,
  type SessionMatchOptions,
} from './options.js';
import { follow, type SseMessage } from './sse.js';
import { Session, startSession, type StartOptions } from './session.js';
import type { ExecOptions, ExecStream } from './exec.js';
import type {
  Admission,
  CommandRequest,
  CommandResult,
  BulkStopAccepted,
  Connect,
  ConnectRequest,
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
import { FINAL_TYPES, UserEventFilter } from './user-events.js';

/** One item of an event stream: a session event (with its id), or the stream's error event. */
export type StreamedEvent =
  (SessionEventData & { readonly id?: string }) | ({ readonly type: 'error' } & StreamErrorData);

/**
 * A typed client of the HTTP API. Error answers are thrown as typed errors, one class per error code
 * ({@link ThrottledError} with `retryAfterMs`, {@link SessionExistsError} with `sessionId`, ...), all
 * subclasses of {@link ApiError}. Streams reconnect by themselves and resume after their last event.
 */
export class CoordinatorClient {
  readonly #options: ResolvedOptions;

  constructor(options: ClientOptions = {}) {
    this.#options = resolveOptions(options);
  }

  /**
   * A connect URL for a port of a live session (`POST /v1/sessions/{sessionId}/connect`): `url` opens it
   * in a browser (on the session's own origin); programs send `token` as `CQ-Connect-Token` on every
   * request and WebSocket upgrade ({@link ProxyConnection.headers}). The port defaults to the one the
   * session announced as ready.
   */
  async connect(sessionId: string, request: ConnectRequest = {}): Promise<ProxyConnection> {
    const answer: Connect = await this.#request(
      'POST',
      `/v1/sessions/${encodeURIComponent(sessionId)}/connect`,
      request,
    );
    return proxyConnection(answer);
  }

  /** Where this client sends its requests. */
  get baseUrl(): string {
    return this.#options.baseUrl;
  }

  /**
   * Server-sent session events as an async iterator: every session's (`GET /v1/events`), or, with
   * `userId`, the user's current state and then each change until the session ends (a `withdrawn`
   * admission is followed by the user's next session). A stream that breaks (the API restarted, a proxy
   * cut it) or goes silent (no event nor heartbeat for twice `heartbeatMs`) reconnects by itself with
   * `Last-Event-ID` and goes on after its last event, each event once; it throws {@link UnavailableError}
   * `stream_closed` when it could not reconnect within `reconnectForMs`, or when 5 connections in a row
   * closed before sending anything. The iterator ends when the user's session ends, or when `signal` aborts.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<StreamedEvent> {
    const { userId } = options;
    const path = userId === undefined ? '/v1/events' : `/v1/users/${encodeURIComponent(userId)}/session/events`;
    // Each event of a user's stream once, though a resumed stream may send again what its first event showed.
    const news = userId === undefined ? undefined : new UserEventFilter();
    const isEnd = (m: SseMessage): boolean => userId !== undefined && FINAL_TYPES.has(m.event ?? '');
    for await (const message of follow(this.#options, path, options, isEnd)) {
      const data = JSON.parse(message.data) as Record<string, unknown>;
      if (message.event === 'error') {
        yield { ...(data as unknown as StreamErrorData), type: 'error' };
        continue;
      }
      const event = data as unknown as SessionEventData;
      if (news !== undefined && !news.isNews(event)) continue;
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
   * (or when `signal` aborts). A stream that breaks or goes silent reconnects by itself after its last
   * line, each line once; it gives up with {@link UnavailableError} `stream_closed` as {@link events} does.
   */
  async *followLogs(
    userId: string,
    sessionId: string,
    options: Pick<EventsOptions, 'lastEventId' | 'signal' | 'onOpen'> = {},
  ): AsyncGenerator<OutputLineData> {
    const path = logsPath(userId, sessionId);
    for await (const message of follow(this.#options, path, options, (m) => m.event === 'end')) {
      if (message.event === 'line') yield JSON.parse(message.data) as OutputLineData;
    }
  }

  async #request<T>(method: string, path: string, body?: unknown, auth = true, timeoutMs?: number): Promise<T> {
    const response = await this.#fetch(method, path, {
      ...(body === undefined ? {} : { body: JSON.stringify(body), type: 'application/json' }),
      auth,
      ...(timeoutMs === undefined ? {} : { timeoutMs }),
    });
    const parsed = await bodyOf(response);
    if (!response.ok) throw toApiError(response.status, parsed, response.headers);
    return parsed as T;
  }

  /** One request to the API (its key unless `auth` is false); an unreachable API as {@link UnavailableError}. */
  async #fetch(
    method: string,
    path: string,
    options: {
      body?: string | Uint8Array | ReadableStream<Uint8Array>;
      type?: string;
      auth?: boolean;
      timeoutMs?: number;
      signal?: AbortSignal;
    } = {},
  ): Promise<Response> {
    const headers: Record<string, string> = {};
    if (options.type !== undefined) headers['content-type'] = options.type;
    if (options.auth !== false && this.#options.apiKey !== undefined)
      headers['authorization'] = `Bearer ${this.#options.apiKey}`;
    try {
      return await fetch(`${this.#options.baseUrl}${path}`, {
        method,
        headers,
        ...(options.body === undefined ? {} : { body: options.body }),
        // A streamed body goes as it is read (Node's fetch needs to be told).
        ...(options.body instanceof ReadableStream ? { duplex: 'half' } : {}),
        signal: options.signal ?? AbortSignal.timeout(options.timeoutMs ?? this.#options.timeoutMs),
      } as RequestInit);
    } catch (err) {
      throw new UnavailableError(
        0,
        'unreachable',
        `The API at ${this.#options.baseUrl} could not be reached: ${(err as Error).message}`,
        undefined,
      );
    }
  }

  /** Throws the typed error of an error answer. */
  async #check(response: Response): Promise<Response> {
    if (response.ok) return response;
    throw toApiError(response.status, await bodyOf(response), response.headers);
  }

  /**
   * `POST /v1/sessions/{sessionId}/commands`: runs `argv` inside a live session and resolves with its exit
   * code and output (each kept to its first 1 MiB). Rejects with {@link CommandTimeoutError} (what it
   * printed) when it outlives `timeoutMs`, {@link NoSessionError} when the session is not live or ends
   * meanwhile. Waits as long as the command may run (its `timeoutMs`, 60 s by default), and more.
   */
  runCommand(sessionId: string, request: CommandRequest): Promise<CommandResult> {
    const waitMs = Math.max(this.#options.timeoutMs, (request.timeoutMs ?? 60_000) + 10_000);
    return this.#request('POST', `/v1/sessions/${encodeURIComponent(sessionId)}/commands`, request, true, waitMs);
  }

  /**
   * `GET /v1/sessions/{sessionId}/files?path=`: a file of a live session, as the session sees its files,
   * as a stream read at the caller's pace. Rejects with {@link NoFileError}, {@link PathForbiddenError}.
   */
  async readFile(
    sessionId: string,
    path: string,
    options: { signal?: AbortSignal } = {},
  ): Promise<ReadableStream<Uint8Array>> {
    const response = await this.#check(
      await this.#fetch('GET', filesPath(sessionId, path), {
        // The body may take long: only the caller's signal ends it.
        signal: options.signal ?? new AbortController().signal,
      }),
    );
    return response.body ?? new ReadableStream({ start: (controller) => controller.close() });
  }

  /**
   * `PUT /v1/sessions/{sessionId}/files?path=`: writes `body` (bytes, text, or a stream, sent as it is
   * read) to a file of a live session, whole or not at all. Rejects with {@link FileTooLargeError},
   * {@link PathForbiddenError}, {@link NoFileError} (its directory is missing), {@link NoSpaceError}.
   */
  async writeFile(
    sessionId: string,
    path: string,
    body: string | Uint8Array | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>,
    options: { signal?: AbortSignal } = {},
  ): Promise<void> {
    const stream =
      typeof body === 'string' || body instanceof Uint8Array || body instanceof ReadableStream
        ? body
        : iterableStream(body);
    const response = await this.#fetch('PUT', filesPath(sessionId, path), {
      body: stream,
      type: 'application/octet-stream',
      signal: options.signal ?? new AbortController().signal,
    });
    await this.#check(response);
    await response.body?.cancel();
  }

  /**
   * `GET /v1/sessions/{sessionId}/exec`: a command inside a live session (`tty: true`: a terminal) as a
   * duplex stream ({@link ExecStream}): write its stdin, read its output, `exited` for its exit code.
   * Node only (it loads `ws`). Rejects with the API's typed error when refused.
   */
  async exec(sessionId: string, options: ExecOptions = {}): Promise<ExecStream> {
    const { openExec } = await import('./exec.js');
    return openExec(this.#options.baseUrl, this.#options.apiKey, sessionId, options);
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

/** An answer's body: its JSON, its text when it is not JSON, undefined when empty. */
async function bodyOf(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return text === '' ? undefined : JSON.parse(text);
  } catch {
    return text;
  }
}

function filesPath(sessionId: string, path: string): string {
  return `/v1/sessions/${encodeURIComponent(sessionId)}/files${queryString({ path })}`;
}

/** An async iterable of bytes as a web stream. */
function iterableStream(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = source[Symbol.asyncIterator]();
  return new ReadableStream({
    async pull(controller) {
      const next = await iterator.next();
      if (next.done === true) controller.close();
      else controller.enqueue(next.value);
    },
    async cancel() {
      await iterator.return?.();
    },
  });
}

function logsPath(userId: string, sessionId: string): string {
  return `/v1/users/${encodeURIComponent(userId)}/sessions/${encodeURIComponent(sessionId)}/logs`;
}

/** A connect URL's parts, and what a program needs to reach the session's port with its token. */
export interface ProxyConnection extends Connect {
  /** The session port's origin, `http(s)://<port>-<sessionId>.<PROXY_DOMAIN>`. */
  readonly origin: string;
  /** The headers that open the port from a program: `{'CQ-Connect-Token': token}`. */
  readonly headers: Readonly<Record<string, string>>;
  /** The `ws:`/`wss:` URL of `path` on the session's origin (open it with the {@link headers}). */
  webSocketUrl(path?: string): string;
}

function proxyConnection(answer: Connect): ProxyConnection {
  const origin = new URL(answer.url).origin;
  return {
    ...answer,
    origin,
    headers: { 'CQ-Connect-Token': answer.token },
    webSocketUrl: (path = '/') => `${origin.replace(/^http/, 'ws')}${path.startsWith('/') ? path : `/${path}`}`,
  };
}
