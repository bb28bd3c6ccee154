/**
 * Every error code the HTTP API answers with, its status and default message. Codes are stable and
 * never reused. The coordinator's registry takes the message of each code it shares from here.
 */
export const apiErrors = {
  invalid_request: { status: 400, message: 'The request is not valid.' },
  invalid_json: { status: 400, message: 'The body is not valid JSON.' },
  unauthorized: { status: 401, message: 'Send a service key as Authorization: Bearer <key>.' },
  forbidden: { status: 403, message: 'This key lacks the scope this route needs.' },
  not_found: { status: 404, message: 'There is no such route.' },
  method_not_allowed: {
    status: 405,
    message: 'This path does not take this method; the Allow header lists the methods it takes.',
  },
  request_timeout: { status: 408, message: 'The request did not arrive in full in time; send it again, faster.' },
  payload_too_large: { status: 413, message: 'The body is larger than 64 KiB.' },
  uri_too_long: { status: 414, message: 'A part of the path is longer than 256 characters.' },
  unsupported_media_type: { status: 415, message: 'Send the body as application/json.' },
  token_invalid: { status: 403, message: 'The token is unknown, expired or already used.' },
  session_exists: { status: 409, message: 'The user already has a live session.' },
  throttled: { status: 429, message: 'Too many requests for this user; retry later.' },
  no_session: { status: 404, message: 'The user has no live session.' },
  no_host: { status: 404, message: 'No live worker host has this id.' },
  no_webhook: { status: 404, message: 'No webhook has this id.' },
  webhook_url_forbidden: {
    status: 400,
    message: 'The webhook URL is not http(s), or resolves to a loopback, private or link-local address.',
  },
  lifetime_too_long: {
    status: 400,
    message: 'The lifetime asked for would end the session after its start + the lifetime cap.',
  },
  session_stopping: { status: 409, message: 'The session is stopping; its lifetime can no longer change.' },
  session_mismatch: {
    status: 409,
    message: "The user's live session is not the one the request names (sessionId); nothing was changed.",
  },
  no_capacity: { status: 503, message: "No worker host of the session's pool has a free slot now; retry shortly." },
  unavailable: { status: 503, message: 'Redis is unavailable; retry shortly.' },
  session_starting: {
    status: 503,
    message: 'The session has not started yet; retry after Retry-After seconds.',
  },
  port_closed: { status: 502, message: 'Nothing listens on this port in the session.' },
  host_unreachable: { status: 502, message: "The session's worker host cannot be reached now." },
  proxy_busy: {
    status: 503,
    message: 'This session has as many open connections through this API process as PROXY_MAX_CONNECTIONS allows.',
  },
  proxy_not_configured: {
    status: 503,
    message: 'The session proxy is off: set PROXY_SECRET (the same on the API and every worker host).',
  },
  command_timeout: {
    status: 408,
    message: 'The command outlived its timeoutMs and was killed with its processes; what it printed is here.',
  },
  path_forbidden: {
    status: 403,
    message: 'The session itself could not read or write this path (the read-only host, or another user’s file).',
  },
  no_file: { status: 404, message: 'No file is at this path, as the session sees its files.' },
  file_too_large: { status: 413, message: 'The file is larger than FILES_MAX_MB; nothing was written.' },
  no_space: {
    status: 507,
    message: "The session's filesystem is full (SESSION_TMP_MB, or its disk); nothing was written.",
  },
  internal: { status: 500, message: 'Something went wrong on our side; it has been logged.' },
} as const;

/** A stable error code of the HTTP API. */
export type ApiErrorCode = keyof typeof apiErrors;

/** The body of every error answer. */
export interface ErrorBody {
  error: { code: string; message: string } & Record<string, unknown>;
}
