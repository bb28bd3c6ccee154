import { randomUUID } from 'node:crypto';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { Keepalive, type RenewAnswer } from './keepalive.js';
import { parseRateReply } from './limiters/rate-limit.js';
import { decodeSession, parseMetadata } from './records.js';
import type { Policy } from './options.js';
import { wrapRedisError } from './redis-errors.js';
import {
  terminalStates,
  type AdmitOutcome,
  type AdmitPolicy,
  type Claim,
  type ClaimOutcome,
  type HistoryEntry,
  type LiveState,
  type SessionRef,
  type SessionView,
  type StopOutcome,
  type TerminalState,
} from './session-types.js';
import { parseToken } from './tokens.js';
import { assertInteger } from './validate.js';

/** How long a cancelled admission's tombstone is kept: longer than any command can wait in a socket. */
export const CANCELLED_ADMISSION_TTL_MS = 10 * 60_000;

/** A session renewal's answer: the lease's new life and whether a stop was requested. */
export type SessionRenewAnswer =
  | (RenewAnswer & { readonly ok: true; readonly stopRequested: boolean; readonly leaseExpiresAt: number })
  | (RenewAnswer & { readonly ok: false });

/** Options of {@link SessionStore.claim}. */
export interface ClaimOptions {
  /** Name of the worker host. */
  workerId: string;
  /** Lease time to live, ms. */
  leaseMs: number;
  /** How long the lease may outlive the lifetime cap so the host can stop the process and record it, ms. */
  graceMs: number;
}

/**
 * Session records: admission, claim by a worker host, renewal, stop requests, terminal states and the
 * per-user history. Every operation is one script: one round trip, atomic, on one cluster slot.
 */
export class SessionStore {
  readonly #context: Context;
  readonly #policy: Policy;

  constructor(context: Context, policy: Policy) {
    this.#context = context;
    this.#policy = policy;
  }

  /**
   * Admits a spawn with `token`: token valid → no live session for the user → spawn throttle open →
   * consume the token, take the next fence, record the session as `pending`. All or nothing, one round
   * trip; a malformed token is refused without one.
   */
  async admit(
    token: string,
    overrides: Partial<AdmitPolicy> = {},
    sessionId: string = randomUUID(),
  ): Promise<AdmitOutcome> {
    const parsed = parseToken(token);
    if (parsed === undefined) return { outcome: 'token_invalid' };
    const policy: AdmitPolicy = {
      spawnIntervalMs: overrides.spawnIntervalMs ?? this.#policy.spawnIntervalMs,
      spawnBurst: overrides.spawnBurst ?? this.#policy.spawnBurst,
      maxLifetimeMs: overrides.maxLifetimeMs ?? this.#policy.maxLifetimeMs,
      pendingTimeoutMs: overrides.pendingTimeoutMs ?? this.#policy.pendingTimeoutMs,
    };
    const { userId } = parsed;
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'admit',
      [
        this.#context.keys.token(userId, parsed.digest),
        keys.session,
        keys.fence,
        keys.spawnThrottle,
        keys.lease,
        keys.history,
        keys.shard,
        keys.ended,
        this.#context.keys.cancelledAdmission(userId, sessionId),
      ],
      [
        sessionId,
        userId,
        policy.spawnIntervalMs,
        policy.spawnBurst,
        policy.maxLifetimeMs,
        policy.pendingTimeoutMs,
        this.#policy.historyLength,
      ],
    );
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
          rate: {
            allowed: true,
            limit: Number(reply[5]),
            remaining: Number(reply[6]),
            retryAfterMs: 0,
            resetAfterMs: Number(reply[7]),
          },
        };
      case ScriptCode.TokenInvalid:
      case ScriptCode.Cancelled: // this admission had been cancelled: a late copy of a timed-out call
        return { outcome: 'token_invalid' };
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
        keys.shard,
        this.#context.keys.cancelledAdmission(parsed.userId, sessionId),
      ],
      [sessionId, parsed.userId, CANCELLED_ADMISSION_TTL_MS],
    );
    if (replyCode(reply) === ScriptCode.Stale) return { cancelled: false, tokenRestored: false };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('cancelAdmission', reply);
    return { cancelled: true, tokenRestored: reply[1] === 1 };
  }

  /**
   * A worker host claims the session of a spawn job: only the matching, still pending session; starts
   * its lifetime clock and takes its lease. A stale job (claimed, stopped or replaced) answers
   * `stale`; a job that waited past the pending deadline ends its session as `lost`.
   */
  async claim(ref: SessionRef, options: ClaimOptions): Promise<ClaimOutcome> {
    assertInteger(options.leaseMs, 'leaseMs', 1);
    assertInteger(options.graceMs, 'graceMs', 0);
    const keys = this.#context.keys.user(ref.userId);
    const owner = `${options.workerId}/${randomUUID()}`;
    const sentAt = performance.now();
    const reply = await this.#context.scripts.run(
      'claimSession',
      [keys.session, keys.lease, keys.history, keys.shard, keys.ended],
      [
        ref.sessionId,
        ref.fence,
        owner,
        options.workerId,
        options.leaseMs,
        options.graceMs,
        ref.userId,
        this.#policy.historyLength,
      ],
    );
    if (replyCode(reply) === ScriptCode.Stale) return { claimed: false, reason: 'stale' };
    if (replyCode(reply) === ScriptCode.PendingTimeout) return { claimed: false, reason: 'pending_timeout' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('claimSession', reply);
    const [, deadline, leaseExpiresAt, lifetimeMs, metadata, startedAt] = reply;
    return {
      claimed: true,
      claim: {
        ...ref,
        owner,
        workerId: options.workerId,
        leaseMs: options.leaseMs,
        graceMs: options.graceMs,
        startedAt: Number(startedAt),
        deadline: Number(deadline),
        leaseExpiresAt: Number(leaseExpiresAt),
        lifetimeMs: Number(lifetimeMs),
        metadata: parseMetadata(String(metadata)),
        sentAt,
      },
    };
  }

  /** The owner renews the session lease and learns whether a stop was requested. One round trip. */
  async renew(claim: Claim): Promise<SessionRenewAnswer> {
    const keys = this.#context.keys.user(claim.userId);
    const reply = await this.#context.scripts.run(
      'renewSession',
      [keys.lease, keys.session, keys.shard],
      [claim.owner, claim.leaseMs, claim.userId],
    );
    if (replyCode(reply) === ScriptCode.LeaseLost) return { ok: false, reason: 'lease_lost' };
    if (replyCode(reply) === ScriptCode.DeadlineReached) return { ok: false, reason: 'deadline_reached' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('renewSession', reply);
    const [, leaseExpiresAt, stop, now] = reply.map(Number);
    return { ok: true, ttlMs: leaseExpiresAt! - now!, leaseExpiresAt: leaseExpiresAt!, stopRequested: stop === 1 };
  }

  /**
   * Keeps the session lease alive every `intervalMs` (about a second, so a stop request is noticed
   * quickly) and calls `onStopRequested` once when the API asked for a stop. The signal aborts as soon
   * as the lease is lost.
   */
  keepalive(
    claim: Claim,
    options: {
      intervalMs?: number;
      /** Safety margin, ms: the signal aborts this long before the lease could run out. @defaultValue 0 */
      marginMs?: number;
      onStopRequested?: () => void;
      onRenewed?: (answer: SessionRenewAnswer & { ok: true }) => void;
      onError?: (err: unknown) => void;
    } = {},
  ): Keepalive<SessionRenewAnswer> {
    let told = false;
    const elapsed = performance.now() - claim.sentAt;
    return new Keepalive<SessionRenewAnswer>({
      renew: () => this.renew(claim),
      intervalMs: options.intervalMs ?? Math.min(1000, Math.max(1, Math.floor(claim.leaseMs / 3))),
      ttlMs: claim.leaseExpiresAt - claim.startedAt - elapsed,
      deadlineInMs: claim.deadline + claim.graceMs - claim.startedAt - elapsed,
      ...(options.marginMs === undefined ? {} : { marginMs: options.marginMs }),
      onRenewed: (answer) => {
        options.onRenewed?.(answer);
        if (answer.stopRequested && !told) {
          told = true;
          options.onStopRequested?.();
        }
      },
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    });
  }

  /**
   * Asks for the user's live session to stop: a pending one ends at once as `stopped`; a running one
   * moves to `stopping` and its host stops it. One round trip.
   */
  async requestStop(userId: string): Promise<StopOutcome> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'requestStop',
      [keys.session, keys.lease, keys.history, keys.shard, keys.ended],
      [userId, this.#policy.historyLength],
    );
    if (replyCode(reply) === ScriptCode.NoSession) return { outcome: 'no_session' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('requestStop', reply);
    return { outcome: String(reply[2]) as 'stopped' | 'stopping', sessionId: String(reply[1]) };
  }

  /**
   * The owner records the session's terminal state and exit code and releases its lease. False when
   * the session had already ended (for example as `lost`): then nothing is changed. One round trip.
   */
  async finish(claim: Claim, state: TerminalState, exitCode?: number): Promise<boolean> {
    if (!(terminalStates as readonly string[]).includes(state))
      throw new InvalidArgumentError(`state must be one of ${terminalStates.join(', ')}`);
    if (exitCode !== undefined) assertInteger(exitCode, 'exitCode', -(2 ** 31), 2 ** 31);
    const keys = this.#context.keys.user(claim.userId);
    const reply = await this.#context.scripts.run(
      'finishSession',
      [keys.session, keys.lease, keys.history, keys.shard, keys.ended],
      [claim.sessionId, claim.owner, state, exitCode ?? '', claim.userId, this.#policy.historyLength],
    );
    if (replyCode(reply) === ScriptCode.Stale) return false;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('finishSession', reply);
    return true;
  }

  /**
   * Sweeps one user: ends the live session as `lost` if it is overdue (pending past its deadline, or
   * running without a lease). Answers whether it did. One round trip.
   */
  async sweepUser(userId: string): Promise<boolean> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'sweepSession',
      [keys.session, keys.lease, keys.history, keys.shard, keys.ended],
      [userId, this.#policy.historyLength],
    );
    return replyCode(reply) === ScriptCode.Ok;
  }

  /**
   * The user's live session, or undefined: a read that may write. An overdue session (its host died,
   * or nobody claimed it in time) is first ended as `lost` (history, index, lease), so a reader never
   * sees a dead session as running. One round trip (the `readSession` script).
   */
  async settleAndRead(userId: string): Promise<SessionView | undefined> {
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'readSession',
      [keys.session, keys.lease, keys.history, keys.shard, keys.ended],
      [userId, this.#policy.historyLength],
    );
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
    return entries.map((entry) => JSON.parse(entry) as HistoryEntry);
  }
}
