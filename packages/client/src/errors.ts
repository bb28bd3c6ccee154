import type { ApiErrorCode } from '@cq/contract';

/** An error answer of the API: its HTTP status, its stable code and message, and the body. */
export class ApiError extends Error {
  override name = 'ApiError';
  readonly status: number;
  readonly code: string;
  readonly body: unknown;

  constructor(status: number, code: string, message: string, body: unknown) {
    super(message);
    this.status = status;
    this.code = code;
    this.body = body;
  }
}

/** 429: wait `retryAfterMs` (exact; `Retry-After` rounded up to seconds) and ask again. */
export class ThrottledError extends ApiError {
  override name = 'ThrottledError';
  readonly retryAfterMs: number;
  constructor(status: number, code: string, message: string, body: unknown, retryAfterMs: number) {
    super(status, code, message, body);
    this.retryAfterMs = retryAfterMs;
  }
}

/** 409 `session_exists`: the user already has a live session, `sessionId`. */
export class SessionExistsError extends ApiError {
  override name = 'SessionExistsError';
  readonly sessionId: string;
  constructor(status: number, code: string, message: string, body: unknown, sessionId: string) {
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

/** 403 `token_invalid`: unknown, expired or already used. */
export class TokenInvalidError extends ApiError {
  override name = 'TokenInvalidError';
}

/** 404 `no_session`. */
export class NoSessionError extends ApiError {
  override name = 'NoSessionError';
}

/** 403 `forbidden`: the key lacks the scope the route needs (`scope`; the message names it and the key). */
export class ForbiddenError extends ApiError {
  override name = 'ForbiddenError';
  readonly scope: string;
  constructor(status: number, code: string, message: string, body: unknown, scope: string) {
    super(status, code, message, body);
    this.scope = scope;
  }
}

/** 401: the service key is missing or wrong. */
export class UnauthorizedError extends ApiError {
  override name = 'UnauthorizedError';
}

/** 503 `unavailable`, or the API could not be reached at all (status 0). */
export class UnavailableError extends ApiError {
  override name = 'UnavailableError';
}

/** 503 `no_capacity`: no worker slot is free now; the token is still valid: ask again after `retryAfterMs`. */
export class NoCapacityError extends UnavailableError {
  override name = 'NoCapacityError';
  readonly retryAfterMs: number;
  constructor(status: number, code: string, message: string, body: unknown, retryAfterMs: number) {
    super(status, code, message, body);
    this.retryAfterMs = retryAfterMs;
  }
}

/**
 * 400 `lifetime_too_long`: the session would end after its start + `MAX_LIFETIME_MS`;
 * `largestLifetimeMs` is the most it can be given now.
 */
export class LifetimeTooLongError extends ApiError {
  override name = 'LifetimeTooLongError';
  readonly largestLifetimeMs: number;
  constructor(status: number, code: string, message: string, body: unknown, largestLifetimeMs: number) {
    super(status, code, message, body);
    this.largestLifetimeMs = largestLifetimeMs;
  }
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

/** Builds the typed error for an error answer. */
export function toApiError(status: number, body: unknown, headers: Headers): ApiError {
  const error = (
    body as
      | {
          error?: {
            code?: unknown;
            message?: unknown;
            retryAfterMs?: unknown;
            sessionId?: unknown;
            largestLifetimeMs?: unknown;
            scope?: unknown;
          };
        }
      | undefined
  )?.error;
  const code = typeof error?.code === 'string' ? error.code : `http_${status}`;
  const message = typeof error?.message === 'string' ? error.message : `HTTP ${status}`;
  const retryAfterMs = (): number => {
    const exact = Number(error?.retryAfterMs);
    return Number.isFinite(exact) ? exact : Number(headers.get('retry-after')) * 1000;
  };
  switch (code as ApiErrorCode) {
    case 'throttled':
      return new ThrottledError(status, code, message, body, retryAfterMs());
    case 'no_capacity':
      return new NoCapacityError(status, code, message, body, retryAfterMs());
    case 'no_host':
      return new NoHostError(status, code, message, body);
    case 'no_webhook':
      return new NoWebhookError(status, code, message, body);
    case 'webhook_url_forbidden':
      return new WebhookUrlForbiddenError(status, code, message, body);
    case 'lifetime_too_long':
      return new LifetimeTooLongError(status, code, message, body, Number(error?.largestLifetimeMs));
    case 'session_exists':
      return new SessionExistsError(status, code, message, body, String(error?.sessionId ?? ''));
    case 'session_mismatch':
      return new SessionMismatchError(status, code, message, body);
    case 'token_invalid':
      return new TokenInvalidError(status, code, message, body);
    case 'no_session':
      return new NoSessionError(status, code, message, body);
    case 'unauthorized':
      return new UnauthorizedError(status, code, message, body);
    case 'forbidden':
      return new ForbiddenError(status, code, message, body, String(error?.scope ?? ''));
    case 'unavailable':
      return new UnavailableError(status, code, message, body);
    default:
      return new ApiError(status, code, message, body);
  }
}
