// The changes of a user's live session through the API: a stop, an update (its lifetime, its labels) and
// its recorded activity, each one script on the user's slot (a stop that ends a pending session gives its
// worker slot back too, on the {workers} slot). SessionStore's methods of these names are these; their
// documentation is there.
import { DEFAULT_POOL, MAX_LABELS } from '@cq/contract';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import type { Policy } from './options.js';
import { decodeSession } from './records.js';
import type {
  ActivityOutcome,
  LifetimeOutcome,
  LiveState,
  SessionChange,
  SessionMatch,
  SessionMismatch,
  StopOutcome,
} from './session-types.js';
import { assertInteger, assertName } from './validate.js';
import { WorkerRegistry } from './workers.js';

/** The script argument of a {@link SessionMatch}: the session meant, or '' for whichever is live. */
function expectedSessionArg(match: SessionMatch): string {
  if (match.sessionId === undefined) return '';
  assertName(match.sessionId, 'sessionId');
  return match.sessionId;
}

/** The outcome of a `session_mismatch` reply (`{-17, live session id or ''}`) to a call with `match`. */
function mismatchOf(reply: readonly unknown[], match: SessionMatch): SessionMismatch {
  const liveSessionId = String(reply[1] ?? '');
  return {
    outcome: 'session_mismatch',
    sessionId: match.sessionId ?? '',
    ...(liveSessionId === '' ? {} : { liveSessionId }),
  };
}

/**
 * A live session's changes: {@link SessionStore.requestStop}, {@link SessionStore.update} and
 * {@link SessionStore.recordActivity}.
 */
export class SessionChanges {
  readonly #context: Context;
  readonly #policy: Policy;

  /** Where a stopped pending session's slot is given back (made at its first use). */
  #workers: WorkerRegistry | undefined;

  constructor(context: Context, policy: Policy) {
    this.#context = context;
    this.#policy = policy;
  }

  /** The worker registry, for what a stop does on the `{workers}` slot (made on first use). */
  get #registry(): WorkerRegistry {
    return (this.#workers ??= new WorkerRegistry(this.#context));
  }

  /** {@link SessionStore.requestStop}. */
  async requestStop(userId: string, match: SessionMatch): Promise<StopOutcome> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run('requestStop', keys.ending, [
      userId,
      this.#policy.historyLength,
      expectedSessionArg(match),
      this.#context.keys.eventChannel(),
      this.#context.keys.hostChannelPrefix(),
    ]);
    switch (replyCode(reply)) {
      case ScriptCode.Ok: {
        const outcome = String(reply[2]) as 'stopped' | 'stopping';
        const sessionId = String(reply[1]);
        const pool = String(reply[3] ?? DEFAULT_POOL);
        // The stop is done, whatever follows: the two steps below are best effort, and a failure of
        // either (an outage, a command refused) must not make a stop that happened answer as failed.
        // A hold not given back runs out by itself (PENDING_TIMEOUT_MS and a margin).
        if (outcome === 'stopped') await this.#registry.release([sessionId], pool).catch(() => 0);
        // Beside the host channel's message (the script published it): a nudge the host's next heartbeat
        // takes, should the message be lost while the host's subscription stays open; without it the
        // session's next renewal brings the stop.
        const workerId = String(reply[4] ?? '');
        if (outcome === 'stopping' && workerId !== '')
          await this.#registry.nudge(workerId, userId).catch(() => undefined);
        return { outcome, sessionId, pool };
      }
      case ScriptCode.NoSession:
        return { outcome: 'no_session' };
      case ScriptCode.SessionMismatch:
        return mismatchOf(reply, match);
      default:
        throw unexpectedReply('requestStop', reply);
    }
  }

  /** {@link SessionStore.update}. */
  async update(
    userId: string,
    change: SessionChange,
    maxLifetimeMs: number,
    match: SessionMatch,
  ): Promise<LifetimeOutcome> {
    if (change.lifetimeMs === undefined && change.labels === undefined)
      throw new InvalidArgumentError('a change needs lifetimeMs or labels');
    if (change.lifetimeMs !== undefined) assertInteger(change.lifetimeMs, 'lifetimeMs', 1);
    assertInteger(maxLifetimeMs, 'maxLifetimeMs', 1);
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run('updateSession', keys.ending, [
      userId,
      this.#policy.historyLength,
      change.lifetimeMs ?? '',
      maxLifetimeMs,
      expectedSessionArg(match),
      change.labels === undefined ? '' : JSON.stringify(change.labels),
      MAX_LABELS,
      this.#context.keys.eventChannel(),
      this.#context.keys.hostChannelPrefix(),
    ]);
    switch (replyCode(reply)) {
      case ScriptCode.Ok: {
        const session = decodeSession(userId, reply.slice(1));
        if (session === undefined) throw unexpectedReply('updateSession', reply);
        return { outcome: 'changed', session };
      }
      case ScriptCode.NoSession:
        return { outcome: 'no_session' };
      case ScriptCode.LifetimeTooLong:
        return { outcome: 'lifetime_too_long', largestLifetimeMs: Number(reply[1]) };
      case ScriptCode.SessionStopping:
        return { outcome: 'stopping', sessionId: String(reply[1]) };
      case ScriptCode.TooManyLabels:
        return { outcome: 'too_many_labels', count: Number(reply[1]) };
      case ScriptCode.SessionMismatch:
        return mismatchOf(reply, match);
      default:
        throw unexpectedReply('updateSession', reply);
    }
  }

  /** {@link SessionStore.recordActivity}. */
  async recordActivity(userId: string, match: SessionMatch): Promise<ActivityOutcome> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run('recordActivity', keys.ending, [
      userId,
      this.#policy.historyLength,
      expectedSessionArg(match),
      this.#context.keys.eventChannel(),
    ]);
    if (replyCode(reply) === ScriptCode.NoSession) return { outcome: 'no_session' };
    if (replyCode(reply) === ScriptCode.SessionMismatch) return mismatchOf(reply, match);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('recordActivity', reply);
    const lastActivityAt = String(reply[3] ?? '');
    return {
      outcome: 'recorded',
      sessionId: String(reply[1]),
      state: String(reply[2]) as LiveState,
      ...(lastActivityAt === '' ? {} : { lastActivityAt: Number(lastActivityAt) }),
    };
  }
}
