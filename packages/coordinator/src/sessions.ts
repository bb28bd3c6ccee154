import { randomUUID } from 'node:crypto';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { parseRateReply } from './limiters/rate-limit.js';
import { decodeSession, parseHistoryEntry, parseMetadata } from './records.js';
import {
  enterSlot,
  listCursorSecret,
  listSessions,
  sessionById,
  sessionIdInSlot,
  stopMatching,
  type BulkStop,
  type ListOptions,
  type SessionById,
  type SessionFilter,
  type SessionPage,
} from './session-list.js';
import { lossGuardArgs } from './liveness/constants.js';
import { SessionChanges } from './session-changes.js';
import { slotOf } from './slots.js';
import type { Policy } from './options.js';
import { wrapRedisError } from './redis-errors.js';
import {
  type ActivityOutcome,
  type AdmitOutcome,
  type AdmitPolicy,
  type HistoryEntry,
  type LifetimeOutcome,
  type LiveState,
  type SessionChange,
  type SessionMatch,
  type SessionView,
  type StopOutcome,
} from './session-types.js';
import { parseToken } from './tokens.js';
import { assertInteger } from './validate.js';

/** How long a cancelled admission's tombstone is kept: longer than any command can wait in a socket. */
export const CANCELLED_ADMISSION_TTL_MS = 10 * 60_000;

/**
 * Session records, the API's half: admission (and its rollback), stop requests, reads and the per-user
 * history; the worker host's half is {@link Claims}. Every operation is one script: one round trip,
 * atomic, on one cluster slot (a stop that ends a pending session then gives its worker slot back: a
 * second script, on the {workers} slot).
 */
export class SessionStore {
  readonly #context: Context;
  readonly #policy: Policy;

  /** Stops, updates and activity of a live session (`session-changes.ts`). */
  readonly #changes: SessionChanges;

  constructor(context: Context, policy: Policy) {
    this.#context = context;
    this.#policy = policy;
    this.#changes = new SessionChanges(context, policy);
  }

  /**
   * Admits a spawn with `token`: token valid → no live session for the user → spawn throttle open →
   * consume the token, take the next fence, record the session as `pending`. All or nothing, one round
   * trip; a malformed token is refused without one.
   */
  async admit(token: string, overrides: Partial<AdmitPolicy> = {}, sessionId?: string): Promise<AdmitOutcome> {
    const parsed = parseToken(token);
    if (parsed === undefined) return { outcome: 'token_invalid' };
    sessionId ??= this.sessionIdFor(parsed.userId);
    const policy: AdmitPolicy = {
      spawnIntervalMs: overrides.spawnIntervalMs ?? this.#policy.spawnIntervalMs,
      spawnBurst: overrides.spawnBurst ?? this.#policy.spawnBurst,
      maxLifetimeMs: overrides.maxLifetimeMs ?? this.#policy.maxLifetimeMs,
      pendingTimeoutMs: overrides.pendingTimeoutMs ?? this.#policy.pendingTimeoutMs,
    };
    const { userId } = parsed;
    const keys = this.#context.keys.user(userId);
    const admit = (): Promise<unknown[]> =>
      this.#context.scripts.run(
        'admit',
        [
          this.#context.keys.token(userId, parsed.digest),
          keys.session,
          keys.fence,
          keys.spawnThrottle,
          keys.lease,
          keys.history,
          keys.liveIndex,
          keys.ended,
          this.#context.keys.cancelledAdmission(userId, sessionId),
          keys.events,
          keys.guard,
          keys.ids,
          keys.listed,
        ],
        [
          sessionId,
          userId,
          policy.spawnIntervalMs,
          policy.spawnBurst,
          policy.maxLifetimeMs,
          policy.pendingTimeoutMs,
          this.#policy.historyLength,
          ...lossGuardArgs,
          this.#context.keys.eventChannel(),
        ],
      );
    let reply = await admit();
    // The first session of a slot since it left the session list: enter the slot, then ask again. A
    // slot another caller unlists in between (it found the slot empty) is entered again; three tries.
    for (let tries = 0; replyCode(reply) === ScriptCode.Unlisted && tries < 3; tries++) {
      await enterSlot(this.#context, slotOf(keys.session));
      reply = await admit();
    }
    switch (replyCode(reply)) {
      case ScriptCode.Ok:
        return {
          outcome: 'admitted',
          sessionId,
          userId,
          fence: Number(reply[1]),
          lifetimeMs: Number(reply[2]),
          metadata: parseMetadata(String(reply[3])),
          pendingDeadline: Number(reply[4]),
          pool: String(reply[8] ?? 'default'),
          rate: {
            allowed: true,
            limit: Number(reply[5]),
            remaining: Number(reply[6]),
            retryAfterMs: 0,
            resetAfterMs: Number(reply[7]),
          },
        };
      case ScriptCode.TokenInvalid:
        return reply[1] === 'before_loss'
          ? { outcome: 'token_invalid', issuedBeforeLoss: true }
          : { outcome: 'token_invalid' };
      case ScriptCode.Cancelled: // this admission had been cancelled: a late copy of a timed-out call
        return { outcome: 'token_invalid' };
      case ScriptCode.StateUncertain:
        return { outcome: 'state_uncertain', retryAfterMs: Number(reply[1]), since: Number(reply[2]) };
      case ScriptCode.SessionExists:
        return { outcome: 'session_exists', userId, sessionId: String(reply[1]), state: String(reply[2]) as LiveState };
      case ScriptCode.Throttled:
        return { outcome: 'throttled', userId, rate: parseRateReply([0, ...reply.slice(1)], 'admit') };
      default:
        throw unexpectedReply('admit', reply);
    }
  }

  /**
   * Rolls back an admission that could not be handed on: the token is usable again (for the rest of its
   * life), the throttle is back where it was, the pending session is gone. False when the session is no
   * longer pending (claimed, stopped or ended) or was never admitted: then nothing is changed, and an
   * admission with this id arriving later (a late copy of a call that timed out) will do nothing.
   * Pass the `sessionId` given to (or returned by) {@link SessionStore.admit}.
   */
  async cancelAdmission(token: string, sessionId: string): Promise<{ cancelled: boolean; tokenRestored: boolean }> {
    const parsed = parseToken(token);
    if (parsed === undefined) throw new InvalidArgumentError('token is malformed');
    const keys = this.#context.keys.user(parsed.userId);
    const reply = await this.#context.scripts.run(
      'cancelAdmission',
      [
        keys.session,
        this.#context.keys.token(parsed.userId, parsed.digest),
        keys.spawnThrottle,
        keys.liveIndex,
        this.#context.keys.cancelledAdmission(parsed.userId, sessionId),
        keys.events,
        keys.ids,
      ],
      [sessionId, parsed.userId, CANCELLED_ADMISSION_TTL_MS, this.#context.keys.eventChannel()],
    );
    if (replyCode(reply) === ScriptCode.Stale) return { cancelled: false, tokenRestored: false };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('cancelAdmission', reply);
    return { cancelled: true, tokenRestored: reply[1] === 1 };
  }

  /**
   * Asks for the user's live session to stop: a pending one ends at once as `stopped` and its worker
   * slot is given back at once (whoever stops it: the HTTP routes, a bulk stop, any other caller); a
   * running one moves to `stopping` and its host stops it, then gives its slot back. With
   * `match.sessionId`, only when that is the live session (else `session_mismatch`, nothing changed).
   * One round trip; two for a pending session (its hold is on the {workers} slot, another cluster slot
   * than the user's). A hold that cannot be given back (Redis away just after the stop) runs out by itself.
   */
  requestStop(userId: string, match: SessionMatch = {}): Promise<StopOutcome> {
    return this.#changes.requestStop(userId, match);
  }

  /** Changes the lifetime of the user's live session: {@link SessionStore.update} with `lifetimeMs` alone. */
  setLifetime(
    userId: string,
    lifetimeMs: number,
    maxLifetimeMs: number = this.#policy.maxLifetimeMs,
    match: SessionMatch = {},
  ): Promise<LifetimeOutcome> {
    return this.update(userId, { lifetimeMs }, maxLifetimeMs, match);
  }

  /**
   * Changes the user's live session, all or nothing, in one script: its labels (merged into the
   * session's; `null` removes a key; at most {@link MAX_LABELS} after the merge) and its lifetime. A
   * running session now ends at (Redis) now + `lifetimeMs`, sooner or later than before, never after its
   * start + `maxLifetimeMs`, and the lease's hard deadline moves with it; its host learns of it at its
   * next renewal. A pending one gets `lifetimeMs` as the lifetime it will have once claimed (at most
   * `maxLifetimeMs`). An overdue session is first ended as `lost` (answering `no_session`); a
   * `stopping` one is left alone. With `match.sessionId`, only when that is the live session (else
   * `session_mismatch`, nothing changed).
   */
  update(
    userId: string,
    change: SessionChange,
    maxLifetimeMs: number = this.#policy.maxLifetimeMs,
    match: SessionMatch = {},
  ): Promise<LifetimeOutcome> {
    return this.#changes.update(userId, change, maxLifetimeMs, match);
  }

  /**
   * Records activity of the user's running session (the service saw its user working): its last
   * activity becomes (Redis) now, which puts off its idle stop; its host learns of it at its next
   * renewal. A pending or stopping session is left as it is; an overdue one is first ended as `lost`
   * (answering `no_session`). With `match.sessionId`, only when that is the live session (else
   * `session_mismatch`, nothing changed). One round trip.
   */
  recordActivity(userId: string, match: SessionMatch = {}): Promise<ActivityOutcome> {
    return this.#changes.recordActivity(userId, match);
  }

  /**
   * Sweeps one user: ends the live session as `lost` if it is overdue (pending past its deadline, or
   * running without a lease), or, given `ofHost` (a session registered under a host lease that ran
   * out), if that session is the live one, was claimed, and was claimed by that host (`workerId`, from
   * the lease's token; `undefined` when the token does not name it: not checked). A session another
   * host claimed is left as it is. Answers whether it ended the session. One round trip.
   */
  async sweepUser(userId: string, ofHost?: { sessionId: string; workerId: string | undefined }): Promise<boolean> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run('sweepSession', keys.ending, [
      userId,
      this.#policy.historyLength,
      ofHost?.sessionId ?? '',
      ofHost?.workerId ?? '',
      this.#context.keys.eventChannel(),
    ]);
    return replyCode(reply) === ScriptCode.Ok;
  }

  /**
   * The user's live session, or undefined: a read that may write. An overdue session (its host died,
   * or nobody claimed it in time) is first ended as `lost` (history, index, lease), so a reader never
   * sees a dead session as running. One round trip (the `readSession` script).
   */
  async settleAndRead(userId: string): Promise<SessionView | undefined> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run('readSession', keys.ending, [
      userId,
      this.#policy.historyLength,
      this.#context.keys.eventChannel(),
    ]);
    if (replyCode(reply) === ScriptCode.NoSession) return undefined;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('readSession', reply);
    const view = decodeSession(userId, reply.slice(1));
    if (view === undefined) throw unexpectedReply('readSession', reply);
    return view;
  }

  /** The user's ended sessions, newest first (at most the policy's `historyLength`). One command (LRANGE). */
  async history(userId: string, count: number = this.#policy.historyLength): Promise<HistoryEntry[]> {
    assertInteger(count, 'count', 1, 10_000);
    let entries: string[];
    try {
      entries = await this.#context.redis.lrange(this.#context.keys.user(userId).history, 0, count - 1);
    } catch (err) {
      throw wrapRedisError(err);
    }
    return entries.map(parseHistoryEntry);
  }

  /**
   * A fresh session id for a session of `userId`: a random UUID whose last four hex digits carry the
   * user's cluster slot, so {@link SessionStore.byId} finds the session in one step.
   */
  sessionIdFor(userId: string): string {
    return sessionIdInSlot(slotOf(this.#context.keys.user(userId).session));
  }

  /** {@link SessionStore.sessionIdFor} the user of `token` (any fresh id for a malformed token: it admits nothing). */
  sessionIdForToken(token: string): string {
    const parsed = parseToken(token);
    return parsed === undefined ? randomUUID() : this.sessionIdFor(parsed.userId);
  }

  /**
   * A session by its id: the live one (as {@link SessionStore.settleAndRead} reads it), or its entry in
   * its user's history while it is there; undefined for an id no session of ours has (or one made
   * before session ids carried their slot). A few round trips on one slot.
   */
  byId(sessionId: string): Promise<SessionById | undefined> {
    return sessionById(this.#context, this, sessionId);
  }

  /**
   * One page of the live sessions of every user that match `filter`, from `from` (the previous page's
   * `next`) on: see {@link listSessions} for the order, what a page costs and what it promises.
   */
  list(filter: SessionFilter = {}, options: ListOptions = {}): Promise<SessionPage> {
    return listSessions(this.#context, this, filter, options);
  }

  /**
   * Stops every live session matching `filter` as {@link SessionStore.requestStop} does, at most `max`
   * (default 1000) per call; `more` when others may match. See {@link stopMatching}.
   */
  stopMatching(filter: SessionFilter, options: { max?: number } = {}): Promise<BulkStop> {
    return stopMatching(this.#context, this, filter, options);
  }

  /** The secret that signs the list's cursors (see {@link listCursorSecret}). */
  listCursorSecret(): Promise<Buffer> {
    return listCursorSecret(this.#context);
  }
}
