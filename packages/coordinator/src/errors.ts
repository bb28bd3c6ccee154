import { apiErrors } from '@cq/contract';

/**
 * One registry of the coordinator's errors. Each code is stable and never reused for something else.
 * The coordinator knows nothing of HTTP: an API maps codes to statuses (`apps/api/src/http-errors.ts`).
 * A code the HTTP API answers with too keeps the contract's message (`@cq/contract`'s `apiErrors`).
 */
export const errorCodes = {
  token_invalid: { message: apiErrors.token_invalid.message },
  session_exists: { message: apiErrors.session_exists.message },
  throttled: { message: apiErrors.throttled.message },
  no_session: { message: apiErrors.no_session.message },
  stale: { message: 'The session is no longer in the expected state.' },
  pending_timeout: { message: 'The session waited too long for a worker and was ended as lost.' },
  lease_lost: { message: 'The lease is not held by this owner any more.' },
  deadline_reached: { message: 'The lease has reached its hard deadline and cannot be renewed.' },
  lease_held: { message: 'Another owner holds the lease.' },
  invalid_argument: { message: 'An argument is not valid.' },
  no_capacity: { message: apiErrors.no_capacity.message },
  no_host: { message: apiErrors.no_host.message },
  lifetime_too_long: { message: apiErrors.lifetime_too_long.message },
  session_stopping: { message: apiErrors.session_stopping.message },
  session_mismatch: { message: apiErrors.session_mismatch.message },
  unavailable: { message: apiErrors.unavailable.message },
  script_failed: { message: 'A coordinator script returned an unexpected reply.' },
} as const;

/** A stable error code of the coordinator. */
export type ErrorCode = keyof typeof errorCodes;

/** Base class of every error the coordinator throws. */
export class CoordinatorError extends Error {
  override name = 'CoordinatorError';
  readonly code: ErrorCode;

  constructor(code: ErrorCode, message?: string, options?: { cause?: unknown }) {
    super(message ?? errorCodes[code].message, options);
    this.code = code;
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

/**
 * The codes the Lua scripts answer with, as the first element of their reply: 1 for success, a
 * negative code for each documented refusal (see each script's `Output:` header). Code compares with
 * these names, never with bare numbers.
 */
export enum ScriptCode {
  Ok = 1,
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
  NoCapacity = -13,
  NoHost = -14,
  LifetimeTooLong = -15,
  SessionStopping = -16,
  SessionMismatch = -17,
  StateUncertain = -18,
  /** admit: the user's slot is not in the session list's directory yet (SessionStore enters it and asks again). */
  Unlisted = -19,
  TooManyLabels = -20,
}

const errorOfScriptCode: Partial<Record<ScriptCode, ErrorCode>> = {
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
  [ScriptCode.NoCapacity]: 'no_capacity',
  [ScriptCode.NoHost]: 'no_host',
  [ScriptCode.LifetimeTooLong]: 'lifetime_too_long',
  [ScriptCode.SessionStopping]: 'session_stopping',
  [ScriptCode.SessionMismatch]: 'session_mismatch',
  [ScriptCode.StateUncertain]: 'unavailable',
};

/** The code a script answered with: the first element of its reply. */
export function replyCode(reply: readonly unknown[]): ScriptCode {
  return Number(reply[0]) as ScriptCode;
}

/**
 * The one converter from a reply its caller does not handle to an error: the registry's typed error
 * for a documented refusal code, a {@link ScriptReplyError} (a bug) for anything else.
 */
export function unexpectedReply(script: string, reply: readonly unknown[]): CoordinatorError {
  const code = replyCode(reply);
  const known = errorOfScriptCode[code];
  if (known === undefined) return new ScriptReplyError(script, reply);
  return new CoordinatorError(
    known,
    `Script ${script} answered ${ScriptCode[code]}, which its caller does not handle: ${errorCodes[known].message}`,
  );
}
