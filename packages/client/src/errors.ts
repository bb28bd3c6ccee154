import type { ApiErrorCode, EndState, SessionEventData, TerminalReason } from './wire.js';

/**
 * What an {@link ApiError} may say: one of the API's codes, or the client's own: `unreachable` (no
 * answer at all), `stream_closed` (a stream ended before its end and could not be resumed: not reopened
 * in time, or closed again and again before sending anything), `timeout` (a wait of the client's own ran
 * out), `http_<status>` (an answer without the API's error body).
 */
export type ClientErrorCode = ApiErrorCode | 'unreachable' | 'stream_closed' | 'timeout' | `http_${number}`;

/** An error answer of the API: its HTTP status (0 when there was none), its stable code and message, and the body. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: ClientErrorCode;
  readonly body: unknown;

  constructor(status: number, code: ClientErrorCode, message: string, body: unknown) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** 400 `invalid_request`: a field, query or path parameter is missing, malformed or unknown (the message names it). */
export class InvalidRequestError extends ApiError {
  override name = 'InvalidRequestError';
}

/** 400 `invalid_json`: the body is not JSON. */
export class InvalidJsonError extends ApiError {
  override name = 'InvalidJsonError';
}

/** 401 `unauthorized`: the service key is missing or wrong. */
export class UnauthorizedError extends ApiError {
  override name = 'UnauthorizedError';
}

/** 403 `forbidden`: the key lacks the scope the route needs (`scope`; the message names it and the key). */
export class ForbiddenError extends ApiError {
  override name = 'ForbiddenError';
  readonly scope: string;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, scope: string) {
    super(status, code, message, body);
    this.scope = scope;
  }
}

/** 404 `not_found`: no such route. */
export class NotFoundError extends ApiError {
  override name = 'NotFoundError';
}

/** 405 `method_not_allowed`. */
export class MethodNotAllowedError extends ApiError {
  override name = 'MethodNotAllowedError';
}

/** 408 `request_timeout`: the request did not arrive in full in time. */
export class RequestTimeoutError extends ApiError {
  override name = 'RequestTimeoutError';
}

/** 413 `payload_too_large`: the body is over 64 KiB. */
export class PayloadTooLargeError extends ApiError {
  override name = 'PayloadTooLargeError';
}

/** 414 `uri_too_long`: a path parameter is over 256 characters. */
export class UriTooLongError extends ApiError {
  override name = 'UriTooLongError';
}

/** 415 `unsupported_media_type`. */
export class UnsupportedMediaTypeError extends ApiError {
  override name = 'UnsupportedMediaTypeError';
}

/** 403 `token_invalid`: unknown, expired or already used. */
export class TokenInvalidError extends ApiError {
  override name = 'TokenInvalidError';
}

/** 409 `session_exists`: the user already has a live session, `sessionId`. */
export class SessionExistsError extends ApiError {
  override name = 'SessionExistsError';
  readonly sessionId: string;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, sessionId: string) {
    super(status, code, message, body);
    this.sessionId = sessionId;
  }
}

/** 429 `throttled`: wait `retryAfterMs` (exact; `Retry-After` rounded up to seconds) and ask again. */
export class ThrottledError extends ApiError {
  override name = 'ThrottledError';
  readonly retryAfterMs: number;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, retryAfterMs: number) {
    super(status, code, message, body);
    this.retryAfterMs = retryAfterMs;
  }
}

/** 404 `no_session`. */
export class NoSessionError extends ApiError {
  override name = 'NoSessionError';
}

/** 404 `no_host`: no live worker host has this id. */
export class NoHostError extends ApiError {
  override name = 'NoHostError';
}

/** 404 `no_webhook`: no webhook has this id. */
export class NoWebhookError extends ApiError {
  override name = 'NoWebhookError';
}

/** 400 `webhook_url_forbidden`: the URL is not http(s), or resolves to a loopback, private or link-local address. */
export class WebhookUrlForbiddenError extends ApiError {
  override name = 'WebhookUrlForbiddenError';
}

/**
 * 400 `lifetime_too_long`: the session would end after its start + `MAX_LIFETIME_MS`;
 * `largestLifetimeMs` is the most it can be given now.
 */
export class LifetimeTooLongError extends ApiError {
  override name = 'LifetimeTooLongError';
  readonly largestLifetimeMs: number;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, largestLifetimeMs: number) {
    super(status, code, message, body);
    this.largestLifetimeMs = largestLifetimeMs;
  }
}

/** 409 `session_stopping`: a stop is under way, so the session's lifetime can no longer change (`sessionId`). */
export class SessionStoppingError extends ApiError {
  override name = 'SessionStoppingError';
  readonly sessionId: string;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, sessionId: string) {
    super(status, code, message, body);
    this.sessionId = sessionId;
  }
}

/**
 * 409 `session_mismatch`: the call named a session (`sessionId`) and the user's live session is another
 * one, or there is none; nothing was changed.
 */
export class SessionMismatchError extends ApiError {
  override name = 'SessionMismatchError';
}

/** 503 `unavailable`, or the API could not be reached at all (status 0, code `unreachable`). */
export class UnavailableError extends ApiError {
  override name = 'UnavailableError';
}

/**
 * 503 `no_capacity`: no worker slot of the token's pool is free now; the token is still valid: ask
 * again after `retryAfterMs`. `reason` says why: `pool_full` (every slot taken) or `pool_unserved` (no
 * live host takes the pool's sessions: a mistyped pool, or its hosts gone or draining); undefined from an
 * API that does not say.
 */
export class NoCapacityError extends UnavailableError {
  override name = 'NoCapacityError';
  readonly retryAfterMs: number;
  /** The pool that had no slot, as the API named it. */
  readonly pool: string | undefined;
  readonly reason: 'pool_full' | 'pool_unserved' | undefined;
  constructor(
    status: number,
    code: ClientErrorCode,
    message: string,
    body: unknown,
    retryAfterMs: number,
    pool?: string,
    reason?: 'pool_full' | 'pool_unserved',
  ) {
    super(status, code, message, body);
    this.retryAfterMs = retryAfterMs;
    this.pool = pool;
    this.reason = reason;
  }
}

/** 500 `internal`: a bug of the API's, logged there with its stack. */
export class InternalError extends ApiError {
  override name = 'InternalError';
}

/**
 * A refusal of the session proxy: 502 `port_closed` (nothing listens on the port in the session), 502
 * `host_unreachable`, 503 `session_starting`, `proxy_busy` (retry after `retryAfterMs`), 503
 * `proxy_not_configured` (the API runs without PROXY_SECRET).
 */
export class ProxyError extends UnavailableError {
  override name = 'ProxyError';
  readonly retryAfterMs: number | undefined;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, retryAfterMs?: number) {
    super(status, code, message, body);
    this.retryAfterMs = retryAfterMs !== undefined && Number.isFinite(retryAfterMs) ? retryAfterMs : undefined;
  }
}

/** A command inside a session outlived its `timeoutMs` and was killed: what it printed until then. */
export class CommandTimeoutError extends ApiError {
  override name = 'CommandTimeoutError';
  readonly exitCode: number | undefined;
  readonly signal: string | undefined;
  readonly stdout: string;
  readonly stderr: string;
  readonly truncated: boolean;
  constructor(status: number, code: ClientErrorCode, message: string, body: unknown, printed: ErrorFields) {
    super(status, code, message, body);
    this.exitCode = typeof printed.exitCode === 'number' ? printed.exitCode : undefined;
    this.signal = typeof printed.signal === 'string' ? printed.signal : undefined;
    this.stdout = typeof printed.stdout === 'string' ? printed.stdout : '';
    this.stderr = typeof printed.stderr === 'string' ? printed.stderr : '';
    this.truncated = printed.truncated === true;
  }
}

/** The session itself could not read or write that path. */
export class PathForbiddenError extends ApiError {
  override name = 'PathForbiddenError';
}

/** No file is at that path, as the session sees its files. */
export class NoFileError extends ApiError {
  override name = 'NoFileError';
}

/** The file is larger than the API's FILES_MAX_MB: nothing was written. */
export class FileTooLargeError extends ApiError {
  override name = 'FileTooLargeError';
}

/** The session's filesystem filled up: nothing was written. */
export class NoSpaceError extends ApiError {
  override name = 'NoSpaceError';
}

/** A wait of the client's own ran out (e.g. {@link CoordinatorClient.start}'s `timeoutMs`). */
export class TimeoutError extends ApiError {
  override name = 'TimeoutError';
}

/**
 * A session ended (or was withdrawn) while the client waited for it to run or be ready: `state` says how,
 * `event` is its last event.
 */
export class SessionEndedError extends ApiError {
  override name = 'SessionEndedError';
  readonly state: EndState | 'withdrawn';
  readonly reason: TerminalReason | undefined;
  readonly exitCode: number | undefined;
  readonly event: SessionEventData;
  constructor(event: SessionEventData) {
    const state = event.type as EndState | 'withdrawn';
    const reason = 'reason' in event ? event.reason : undefined;
    const exitCode = 'exitCode' in event ? event.exitCode : undefined;
    super(
      0,
      'no_session',
      `The session ${event.sessionId} of ${event.userId} ended ${state}` +
        `${reason === undefined ? '' : ` (${reason})`}${exitCode === undefined ? '' : `, exit code ${exitCode}`} ` +
        'before it was what the call waited for.',
      event,
    );
    this.state = state;
    this.reason = reason;
    this.exitCode = exitCode;
    this.event = event;
  }
}

/** The fields an error body's `error` may carry beyond code and message. */
interface ErrorFields {
  code?: unknown;
  message?: unknown;
  retryAfterMs?: unknown;
  sessionId?: unknown;
  largestLifetimeMs?: unknown;
  scope?: unknown;
  pool?: unknown;
  reason?: unknown;
  exitCode?: unknown;
  signal?: unknown;
  stdout?: unknown;
  stderr?: unknown;
  truncated?: unknown;
}

type Make = (
  status: number,
  code: ClientErrorCode,
  message: string,
  body: unknown,
  error: ErrorFields,
  headers: Headers,
) => ApiError;

const retryAfterMs = (error: ErrorFields, headers: Headers): number => {
  const exact = Number(error.retryAfterMs);
  return Number.isFinite(exact) ? exact : Number(headers.get('retry-after')) * 1000;
};

/** The typed error of every code the API answers with: a type error here when the API gains a code. */
const errorOfCode: Readonly<Record<ApiErrorCode, Make>> = {
  invalid_request: (s, c, m, b) => new InvalidRequestError(s, c, m, b),
  invalid_json: (s, c, m, b) => new InvalidJsonError(s, c, m, b),
  unauthorized: (s, c, m, b) => new UnauthorizedError(s, c, m, b),
  forbidden: (s, c, m, b, e) => new ForbiddenError(s, c, m, b, String(e.scope ?? '')),
  not_found: (s, c, m, b) => new NotFoundError(s, c, m, b),
  method_not_allowed: (s, c, m, b) => new MethodNotAllowedError(s, c, m, b),
  request_timeout: (s, c, m, b) => new RequestTimeoutError(s, c, m, b),
  payload_too_large: (s, c, m, b) => new PayloadTooLargeError(s, c, m, b),
  uri_too_long: (s, c, m, b) => new UriTooLongError(s, c, m, b),
  unsupported_media_type: (s, c, m, b) => new UnsupportedMediaTypeError(s, c, m, b),
  token_invalid: (s, c, m, b) => new TokenInvalidError(s, c, m, b),
  session_exists: (s, c, m, b, e) => new SessionExistsError(s, c, m, b, String(e.sessionId ?? '')),
  throttled: (s, c, m, b, e, h) => new ThrottledError(s, c, m, b, retryAfterMs(e, h)),
  no_session: (s, c, m, b) => new NoSessionError(s, c, m, b),
  no_host: (s, c, m, b) => new NoHostError(s, c, m, b),
  no_webhook: (s, c, m, b) => new NoWebhookError(s, c, m, b),
  webhook_url_forbidden: (s, c, m, b) => new WebhookUrlForbiddenError(s, c, m, b),
  lifetime_too_long: (s, c, m, b, e) => new LifetimeTooLongError(s, c, m, b, Number(e.largestLifetimeMs)),
  session_stopping: (s, c, m, b, e) => new SessionStoppingError(s, c, m, b, String(e.sessionId ?? '')),
  session_mismatch: (s, c, m, b) => new SessionMismatchError(s, c, m, b),
  no_capacity: (s, c, m, b, e, h) =>
    new NoCapacityError(
      s,
      c,
      m,
      b,
      retryAfterMs(e, h),
      typeof e.pool === 'string' ? e.pool : undefined,
      e.reason === 'pool_full' || e.reason === 'pool_unserved' ? e.reason : undefined,
    ),
  unavailable: (s, c, m, b) => new UnavailableError(s, c, m, b),
  session_starting: (s, c, m, b, e, h) => new ProxyError(s, c, m, b, retryAfterMs(e, h)),
  port_closed: (s, c, m, b) => new ProxyError(s, c, m, b),
  host_unreachable: (s, c, m, b) => new ProxyError(s, c, m, b),
  proxy_busy: (s, c, m, b, e, h) => new ProxyError(s, c, m, b, retryAfterMs(e, h)),
  proxy_not_configured: (s, c, m, b) => new ProxyError(s, c, m, b),
  command_timeout: (s, c, m, b, e) => new CommandTimeoutError(s, c, m, b, e),
  path_forbidden: (s, c, m, b) => new PathForbiddenError(s, c, m, b),
  no_file: (s, c, m, b) => new NoFileError(s, c, m, b),
  file_too_large: (s, c, m, b) => new FileTooLargeError(s, c, m, b),
  no_space: (s, c, m, b) => new NoSpaceError(s, c, m, b),
  internal: (s, c, m, b) => new InternalError(s, c, m, b),
};

/** Builds the typed error for an error answer. */
export function toApiError(status: number, body: unknown, headers: Headers): ApiError {
  const error = ((body as { error?: ErrorFields } | undefined)?.error ?? {}) as ErrorFields;
  const message = typeof error.message === 'string' ? error.message : `HTTP ${status}`;
  const code = typeof error.code === 'string' ? error.code : undefined;
  const make = code !== undefined && Object.hasOwn(errorOfCode, code) ? errorOfCode[code as ApiErrorCode] : undefined;
  if (make !== undefined) return make(status, code as ApiErrorCode, message, body, error, headers);
  // Not one of the API's answers (a proxy's 502, say): by its status.
  const fallback: ClientErrorCode = `http_${status}`;
  return status === 502 || status === 503 || status === 504
    ? new UnavailableError(status, fallback, message, body)
    : new ApiError(status, fallback, message, body);
}
