/**
 * One registry of the coordinator's errors. Each code is stable and never reused for something else;
 * the HTTP status that an API should answer with lives beside it.
 */
export const errorCodes = {
  token_invalid: { status: 403, message: 'The token is unknown, expired or already used.' },
  session_exists: { status: 409, message: 'The user already has a live session.' },
  throttled: { status: 429, message: 'Too many requests for this user; retry later.' },
  no_session: { status: 404, message: 'The user has no live session.' },
  stale: { status: 409, message: 'The session is no longer in the expected state.' },
  pending_timeout: { status: 409, message: 'The session waited too long for a worker and was ended as lost.' },
  lease_lost: { status: 409, message: 'The lease is not held by this owner any more.' },
  deadline_reached: { status: 409, message: 'The lease has reached its hard deadline and cannot be renewed.' },
  lease_held: { status: 409, message: 'Another owner holds the lease.' },
  invalid_argument: { status: 400, message: 'An argument is not valid.' },
  unavailable: { status: 503, message: 'Redis is unavailable; retry shortly.' },
  script_failed: { status: 500, message: 'A coordinator script returned an unexpected reply.' },
} as const;

/** A stable error code of the coordinator. */
export type ErrorCode = keyof typeof errorCodes;

/** Base class of every error the coordinator throws. */
export class CoordinatorError extends Error {
  override name = 'CoordinatorError';
  readonly code: ErrorCode;
  /** HTTP status an API should answer with. */
  readonly status: number;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? errorCodes[code].message, options);
    this.code = code;
    this.status = errorCodes[code].status;
  }
}

/** An argument was refused before anything was sent to Redis. */
export class InvalidArgumentError extends CoordinatorError {
  override name = 'InvalidArgumentError';
  constructor(message: string) {
    super('invalid_argument', message);
  }
}

/** Redis could not be reached or did not answer in time. */
export class UnavailableError extends CoordinatorError {
  override name = 'UnavailableError';
  constructor(cause: unknown) {
    const detail = cause instanceof Error ? cause.message : String(cause);
    super('unavailable', `Redis is unavailable (${detail}); retry shortly.`, { cause });
  }
}

/** A script replied with something the library does not understand: a bug, never a client's fault. */
export class ScriptReplyError extends CoordinatorError {
  override name = 'ScriptReplyError';
  constructor(script: string, reply: unknown) {
    super('script_failed', `Script ${script} replied ${JSON.stringify(reply)}, which is not a documented output.`);
  }
}

/** The negative codes the Lua scripts return (see each script's `Output:` header). */
export enum ScriptCode {
  TokenInvalid = -1,
  SessionExists = -2,
  Throttled = -3,
  Stale = -4,
  PendingTimeout = -6,
  LeaseLost = -7,
  DeadlineReached = -8,
  LeaseHeld = -9,
  NoSession = -10,
  BadArgument = -11,
  Cancelled = -12,
}

const codeOfScriptCode: Record<ScriptCode, ErrorCode> = {
  [ScriptCode.TokenInvalid]: 'token_invalid',
  [ScriptCode.SessionExists]: 'session_exists',
  [ScriptCode.Throttled]: 'throttled',
  [ScriptCode.Stale]: 'stale',
  [ScriptCode.PendingTimeout]: 'pending_timeout',
  [ScriptCode.LeaseLost]: 'lease_lost',
  [ScriptCode.DeadlineReached]: 'deadline_reached',
  [ScriptCode.LeaseHeld]: 'lease_held',
  [ScriptCode.NoSession]: 'no_session',
  [ScriptCode.BadArgument]: 'invalid_argument',
  [ScriptCode.Cancelled]: 'token_invalid',
};

/** Turns a script's negative reply code into the typed error of the registry. */
export function scriptCodeToError(code: number, script: string): CoordinatorError {
  const known = codeOfScriptCode[code as ScriptCode] as ErrorCode | undefined;
  if (known === undefined) return new ScriptReplyError(script, code);
  return new CoordinatorError(known);
}

/** The error code a script code stands for, or undefined for an unknown code. */
export function errorCodeOfScriptCode(code: number): ErrorCode | undefined {
  return codeOfScriptCode[code as ScriptCode] as ErrorCode | undefined;
}
