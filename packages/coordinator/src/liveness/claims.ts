import { randomUUID } from 'node:crypto';
import type { Context } from '../context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from '../errors.js';
import { lossGuardArgs } from './constants.js';
import { Keepalive, type RenewAnswer } from './keepalive.js';
import type { Policy } from '../options.js';
import { parseLabels, parseMetadata } from '../records.js';
import {
  endReasonStates,
  endReasons,
  terminalStates,
  type Claim,
  type ClaimOutcome,
  type EndReason,
  type SessionRef,
  type StopReason,
  type TerminalState,
} from '../session-types.js';
import { slotOf } from '../slots.js';
import { assertInteger } from '../validate.js';

/**
 * A session renewal's answer: the lease's new life, whether a stop was requested (and why), the
 * session's deadlines as they are now (a lifetime change through the API moves them) and when it
 * would count as idle.
 */
export type SessionRenewAnswer =
  | (RenewAnswer & {
      readonly ok: true;
      readonly stopRequested: boolean;
      /** Why, when a stop was requested: through the API (`requested`), or its idle timeout passed (`idle`). */
      readonly stopReason?: StopReason;
      /**
       * How long until the session counts as idle without further activity, from the moment the renewal
       * was sent, ms (the renewal then finds it idle); undefined without an idle timeout.
       */
      readonly idleInMs?: number;
      readonly leaseExpiresAt: number;
      /** How long until the lease's hard deadline, from the moment the renewal was sent, ms. */
      readonly deadlineInMs: number;
      /** When the session's lifetime runs out, epoch ms (Redis clock). */
      readonly deadline: number;
      /** How long until {@link deadline}, from the moment the renewal was sent, ms. */
      readonly lifetimeLeftMs: number;
      /** The run_id of the Redis process that answered, when asked for (`RenewOptions.run`). */
      readonly run?: string;
    })
  | (RenewAnswer & { readonly ok: false });

/** Options of {@link Claims.claim}. */
export interface ClaimOptions {
  /** Name of the worker host. */
  workerId: string;
  /** Lease time to live, ms. */
  leaseMs: number;
  /** How long the lease may outlive the lifetime cap so the host can stop the process and record it, ms. */
  graceMs: number;
  /** The pool the host serves: a session of another pool is not claimed (`wrong_pool`). @defaultValue `'default'` */
  pool?: string;
}

/** How a renewal is asked for. */
export interface RenewOptions {
  /** The lease asked for, ms. @defaultValue the claim's `leaseMs` */
  readonly leaseMs?: number;
  /** True to learn which Redis process answered (its run_id): two commands more. */
  readonly run?: boolean;
}

/** Longest endpoint a session may announce, characters. */
export const MAX_ENDPOINT_LENGTH = 512;

/**
 * Session records, the worker host's half: claiming a pending session (which takes its lease),
 * renewing that lease (and learning of stop requests), and recording the terminal state. The API's
 * half is {@link SessionStore}. Every operation is one script: one round trip, atomic, on one slot.
 */
export class Claims {
  readonly #context: Context;
  readonly #policy: Policy;

  constructor(context: Context, policy: Policy) {
    this.#context = context;
    this.#policy = policy;
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
      [...keys.ending, keys.guard],
      [
        ref.sessionId,
        ref.fence,
        owner,
        options.workerId,
        options.leaseMs,
        options.graceMs,
        ref.userId,
        this.#policy.historyLength,
        options.pool ?? 'default',
        ...lossGuardArgs,
        this.#context.keys.eventChannel(),
      ],
    );
    if (replyCode(reply) === ScriptCode.Stale && reply[1] === 'wrong_pool')
      return { claimed: false, reason: 'wrong_pool', pool: String(reply[2]) };
    if (replyCode(reply) === ScriptCode.Stale) return { claimed: false, reason: 'stale' };
    if (replyCode(reply) === ScriptCode.PendingTimeout) return { claimed: false, reason: 'pending_timeout' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('claimSession', reply);
    const [, deadline, leaseExpiresAt, lifetimeMs, metadata, startedAt, idleTimeoutMs, labels, pool] = reply;
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
        idleTimeoutMs: Number(idleTimeoutMs ?? 0),
        labels: parseLabels(labels === undefined ? undefined : String(labels)),
        pool: pool === undefined ? 'default' : String(pool),
        sentAt,
      },
    };
  }

  /**
   * The owner renews the session lease and learns whether a stop was requested and until when the
   * session and its lease may run (both move when the API changes the session's lifetime). It passes on
   * the session's activity it saw, `activityAgeMs` before now (undefined: none), and learns when the
   * session would count as idle; a running session whose idle timeout has passed is stopped here (the
   * answer's `stopReason` is `idle`). One round trip.
   */
  async renew(claim: Claim, activityAgeMs?: number, options: RenewOptions = {}): Promise<SessionRenewAnswer> {
    const keys = this.#context.keys.user(claim.userId);
    const reply = await this.#context.scripts.run(
      'renewSession',
      [keys.lease, keys.session, keys.liveIndex, keys.events, keys.guard],
      [
        claim.owner,
        options.leaseMs ?? claim.leaseMs,
        claim.userId,
        activityAgeMs === undefined ? '' : Math.max(0, Math.round(activityAgeMs)),
        options.run === true ? 1 : '',
        ...lossGuardArgs,
        this.#context.keys.eventChannel(),
      ],
    );
    if (replyCode(reply) === ScriptCode.LeaseLost) return { ok: false, reason: 'lease_lost' };
    if (replyCode(reply) === ScriptCode.DeadlineReached) return { ok: false, reason: 'deadline_reached' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('renewSession', reply);
    const [, leaseExpiresAt, stop, now, hardDeadline, deadline, idleAt] = reply.map(Number) as [
      number,
      number,
      number,
      number,
      number,
      number,
      number,
    ];
    const reason = String(reply[7] ?? '');
    const run = String(reply[8] ?? '');
    return {
      ok: true,
      ttlMs: leaseExpiresAt - now,
      leaseExpiresAt,
      stopRequested: stop === 1,
      ...(stop === 1 ? { stopReason: reason === 'idle' ? 'idle' : 'requested' } : {}),
      deadlineInMs: hardDeadline - now,
      deadline,
      lifetimeLeftMs: deadline - now,
      ...(idleAt > 0 ? { idleInMs: idleAt - now } : {}),
      ...(run === '' ? {} : { run }),
    };
  }

  /**
   * The Redis master serving the user's slot as this client's slot map has it (its address; '' on a
   * standalone Redis, or a slot the map does not know yet): held sessions of one master share a probe.
   * The map is ioredis's `Cluster.slots` (per slot, the master's `host:port` first), a public member of
   * its Cluster type, which a standalone client does not have.
   */
  masterOf(userId: string): string {
    const redis = this.#context.redis;
    if (!('slots' in redis)) return '';
    return redis.slots[slotOf(this.#context.keys.user(userId).session)]?.[0] ?? '';
  }

  /**
   * The run_id of the Redis process serving the user's slot, as its loss guard confirms it: a host
   * holding sessions under its host lease asks it of one session's slot per Redis master with every periodic heartbeat,
   * to learn when the process that keeps their records was replaced. One round trip.
   */
  async probe(userId: string): Promise<string> {
    const reply = await this.#context.scripts.run('probeSlot', [this.#context.keys.user(userId).guard], lossGuardArgs);
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('probeSlot', reply);
    return String(reply[1]);
  }

  /**
   * Keeps the session lease alive every `intervalMs` (a third of the lease: stops and lifetime changes
   * reach the host on its channel, HostChannel, which asks for a renewal at once) and calls
   * `onStopRequested` once when a stop was asked for (through the API, or because the session was
   * idle). Each renewal carries the activity `activityAgeMs` reports. The signal aborts as soon as the
   * lease is lost.
   */
  keepalive(
    claim: Claim,
    options: {
      intervalMs?: number;
      /** Safety margin, ms: the signal aborts this long before the lease could run out. @defaultValue 0 */
      marginMs?: number;
      /** How long ago the session was last seen active, ms, asked as each renewal is sent (undefined: never). */
      activityAgeMs?: () => number | undefined;
      onStopRequested?: (reason: StopReason) => void;
      /** After each renewal; `sentAt` is the `performance.now()` instant it was sent (its answer's times count from then). */
      onRenewed?: (answer: SessionRenewAnswer & { ok: true }, sentAt: number) => void;
      onError?: (err: unknown) => void;
      /** How each renewal is asked for, read as it is sent. @defaultValue the claim's lease */
      renewWith?: () => RenewOptions;
      /** Until when (a `performance.now()` instant) something else vouches for the lease: see {@link KeepaliveOptions.cover}. */
      cover?: () => number;
    } = {},
  ): Keepalive<SessionRenewAnswer> {
    let told = false;
    const elapsed = performance.now() - claim.sentAt;
    const intervalMs = options.intervalMs ?? Math.max(1, Math.floor(claim.leaseMs / 3));
    return new Keepalive<SessionRenewAnswer>({
      renew: () => this.renew(claim, options.activityAgeMs?.(), options.renewWith?.()),
      intervalMs,
      // A failed renewal is tried again within a second, so a short outage costs no session.
      retryMs: Math.min(1000, intervalMs),
      ttlMs: claim.leaseExpiresAt - claim.startedAt - elapsed,
      deadlineInMs: claim.deadline + claim.graceMs - claim.startedAt - elapsed,
      ...(options.marginMs === undefined ? {} : { marginMs: options.marginMs }),
      onRenewed: (answer, sentAt) => {
        options.onRenewed?.(answer, sentAt);
        if (answer.stopRequested && !told) {
          told = true;
          options.onStopRequested?.(answer.stopReason ?? 'requested');
        }
      },
      ...(options.onError === undefined ? {} : { onError: options.onError }),
      ...(options.cover === undefined ? {} : { cover: options.cover }),
    }).start();
  }

  /**
   * The owner marks the running session ready, with the endpoint where it can be reached (at most
   * {@link MAX_ENDPOINT_LENGTH} characters) and the port the session proxy opens by default (a later call
   * may change either). False when the session is no longer this owner's. One round trip.
   */
  async markReady(claim: Claim, endpoint?: string, port?: number): Promise<boolean> {
    if (endpoint !== undefined && (endpoint.length > MAX_ENDPOINT_LENGTH || endpoint === ''))
      throw new InvalidArgumentError(`endpoint must be 1 to ${MAX_ENDPOINT_LENGTH} characters`);
    if (port !== undefined && !(Number.isInteger(port) && port >= 1 && port <= 65_535))
      throw new InvalidArgumentError('port must be an integer from 1 to 65535');
    const keys = this.#context.keys.user(claim.userId);
    const reply = await this.#context.scripts.run(
      'markReady',
      [keys.session, keys.events],
      [claim.owner, endpoint ?? '', this.#context.keys.eventChannel(), port ?? ''],
    );
    if (replyCode(reply) === ScriptCode.LeaseLost) return false;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('markReady', reply);
    return true;
  }

  /**
   * The owner records the session's terminal state, exit code and, when it knows why, the reason (one of
   * {@link endReasons}, only with its state: `out_of_memory` with `failed`, `idle` with `stopped`), and releases its lease. The
   * reason goes to the history entry, the recent endings and the terminal event. False when the session
   * had already ended (for example as `lost`): then nothing is changed. One round trip.
   */
  async finish(claim: Claim, state: TerminalState, exitCode?: number, reason?: EndReason): Promise<boolean> {
    if (!(terminalStates as readonly string[]).includes(state))
      throw new InvalidArgumentError(`state must be one of ${terminalStates.join(', ')}`);
    if (exitCode !== undefined) assertInteger(exitCode, 'exitCode', -(2 ** 31), 2 ** 31);
    if (reason !== undefined) {
      if (!(endReasons as readonly string[]).includes(reason))
        throw new InvalidArgumentError(`reason must be one of ${endReasons.join(', ')}`);
      if (endReasonStates[reason] !== state)
        throw new InvalidArgumentError(`reason ${reason} goes with state ${endReasonStates[reason]}, not ${state}`);
    }
    const keys = this.#context.keys.user(claim.userId);
    const reply = await this.#context.scripts.run('finishSession', keys.ending, [
      claim.sessionId,
      claim.owner,
      state,
      exitCode ?? '',
      claim.userId,
      this.#policy.historyLength,
      reason ?? '',
      claim.fence,
      claim.startedAt,
      claim.workerId,
      JSON.stringify(claim.labels),
      claim.pool,
      this.#context.keys.eventChannel(),
    ]);
    if (replyCode(reply) === ScriptCode.Stale) return false;
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('finishSession', reply);
    return true;
  }
}
