import { endReasons, sessionStates, terminalReasons, terminalStates } from '@cq/contract';
import type { RateLimitResult } from './limiters/rate-limit.js';
import type { Metadata } from './tokens.js';

// The lists are the contract's (one source for the API's schemas and the records here).
export { endReasons, sessionStates, terminalReasons, terminalStates };

/** A state of a session. */
export type SessionState = (typeof sessionStates)[number];
/** A state a session ends in. */
export type TerminalState = (typeof terminalStates)[number];
/** The states of a live session. */
export type LiveState = 'pending' | 'running' | 'stopping';

/** A session's labels: key → value (see {@link Labels} limits in `@cq/contract`). */
export type Labels = Readonly<Record<string, string>>;

/** A user's live session as stored. Times are epoch milliseconds from the Redis clock. */
export interface SessionView {
  readonly sessionId: string;
  readonly userId: string;
  readonly fence: number;
  readonly state: LiveState;
  /** The pool of worker hosts it runs on (`default` unless its token named one). */
  readonly pool: string;
  /** Its labels, from its token, changed since by {@link SessionStore.update}. */
  readonly labels: Labels;
  readonly createdAt: number;
  readonly lifetimeMs: number;
  readonly metadata: Metadata;
  /** The session announced it is ready (through `SESSION_NOTIFY_FD`). */
  readonly ready: boolean;
  /** Where it can be reached, as it announced. */
  readonly endpoint?: string;
  /** The port the session announced for the session proxy (its readiness line's `port`). */
  readonly port?: number;
  /** Until when a pending session may wait for a worker. */
  readonly pendingDeadline?: number;
  readonly workerId?: string;
  readonly startedAt?: number;
  readonly leaseExpiresAt?: number;
  /** When the lifetime cap runs out. */
  readonly deadline?: number;
  /** Why a stop was asked for, when it was: `requested` (through the API) or `idle`. */
  readonly stopRequested?: string;
  /** Stopped after this long without activity, ms; absent: never. */
  readonly idleTimeoutMs?: number;
  /** Its last activity, once running (epoch ms). */
  readonly lastActivityAt?: number;
}

/** One ended session in a user's history. */
export interface HistoryEntry {
  readonly sessionId: string;
  readonly fence: number;
  readonly state: TerminalState;
  /** Its pool (`default` for sessions that ended before sessions had one). */
  readonly pool: string;
  /** Its labels as they were when it ended. */
  readonly labels: Labels;
  readonly workerId?: string;
  readonly startedAt?: number;
  readonly endedAt: number;
  readonly exitCode?: number;
  /**
   * Why it ended so: always for `lost` (a host had it, `host_lost`; none claimed it in time,
   * `not_claimed`; Redis lost its records, `state_lost`); for another ending when its host said, e.g. `out_of_memory` for `failed`.
   */
  readonly reason?: TerminalReason;
}

/** Why a session ended as `lost`. */
export type LostReason = 'host_lost' | 'not_claimed' | 'state_lost';

/** A reason a worker host may give for a session's end; see {@link endReasons}. */
export type EndReason = (typeof endReasons)[number];
/** The terminal state each {@link EndReason} goes with; any other state with it is refused. */
export const endReasonStates: Readonly<Record<EndReason, TerminalState>> = { out_of_memory: 'failed', idle: 'stopped' };

/** Why a running session is asked to stop: `requested` through the API, or `idle` (no activity for its idle timeout). */
export type StopReason = 'requested' | 'idle';

/** A reason a terminal record can carry; see {@link terminalReasons}. */
export type TerminalReason = (typeof terminalReasons)[number];

/** The spawn rules {@link SessionStore.admit} applies; defaults come from the coordinator's policy. */
export interface AdmitPolicy {
  /** Spawn throttle (GCRA) emission interval, ms. */
  spawnIntervalMs: number;
  /** Spawn throttle burst. */
  spawnBurst: number;
  /** Cap on the session's lifetime, ms. */
  maxLifetimeMs: number;
  /** How long the session may wait for a worker, ms. */
  pendingTimeoutMs: number;
}

/** What {@link SessionStore.admit} answers. A rejection changed nothing. */
export type AdmitOutcome =
  | {
      readonly outcome: 'admitted';
      readonly sessionId: string;
      readonly userId: string;
      readonly fence: number;
      readonly lifetimeMs: number;
      readonly metadata: Metadata;
      readonly pendingDeadline: number;
      /** The pool it runs in (its token's). */
      readonly pool: string;
      readonly rate: RateLimitResult;
    }
  | {
      readonly outcome: 'token_invalid';
      /** The token was issued before Redis last restarted or failed over: it may have been spent in the writes lost then. */
      readonly issuedBeforeLoss?: true;
    }
  | {
      /**
       * Redis restarted or failed over at `since` (epoch ms) and may have lost writes: sessions admitted
       * before may still run, so nothing is admitted for `retryAfterMs` (lua/includes/lossGuard.lua).
       */
      readonly outcome: 'state_uncertain';
      readonly retryAfterMs: number;
      readonly since: number;
    }
  | {
      readonly outcome: 'session_exists';
      readonly userId: string;
      readonly sessionId: string;
      readonly state: LiveState;
    }
  | { readonly outcome: 'throttled'; readonly userId: string; readonly rate: RateLimitResult };

/** What a worker host needs to know to claim a session (the spawn job's payload). */
export interface SessionRef {
  readonly userId: string;
  readonly sessionId: string;
  readonly fence: number;
}

/** A session claimed by a worker host: it holds the session lease. */
export interface Claim extends SessionRef {
  readonly owner: string;
  readonly workerId: string;
  readonly leaseMs: number;
  /** How long the lease may outlive the lifetime cap, ms. */
  readonly graceMs: number;
  readonly startedAt: number;
  /** When the lifetime cap runs out, epoch ms. */
  readonly deadline: number;
  readonly leaseExpiresAt: number;
  readonly lifetimeMs: number;
  readonly metadata: Metadata;
  /** Its idle timeout, ms; 0: never idle. Its idle clock starts at {@link Claim.startedAt}. */
  readonly idleTimeoutMs: number;
  /** Its labels as they were when it was claimed (`SESSION_LABELS`). */
  readonly labels: Labels;
  /** Its pool (`SESSION_POOL`). */
  readonly pool: string;
  /** `performance.now()` when the claim was sent: the local clock's conservative start of the lease. */
  readonly sentAt: number;
}

/** What {@link SessionStore.claim} answers. */
export type ClaimOutcome =
  | { readonly claimed: true; readonly claim: Claim }
  | { readonly claimed: false; readonly reason: 'stale' | 'pending_timeout' }
  /** The session is of `pool`, not of the claiming host's: nothing changed. */
  | { readonly claimed: false; readonly reason: 'wrong_pool'; readonly pool: string };

/**
 * Which session a change to a user's session is meant for (the API's `?sessionId=`): with `sessionId`,
 * the change is made only when the user's live session is that one, in the same script that makes it.
 */
export interface SessionMatch {
  /** The session meant; absent: whichever session is live. */
  readonly sessionId?: string;
}

/**
 * A change refused because the user's live session is not the one {@link SessionMatch} named: another
 * one, or none. Nothing was changed.
 */
export interface SessionMismatch {
  readonly outcome: 'session_mismatch';
  /** The session meant ({@link SessionMatch.sessionId}). */
  readonly sessionId: string;
  /** The user's live session; absent when there is none. */
  readonly liveSessionId?: string;
}

/**
 * What {@link SessionStore.setLifetime} answers. `changed` carries the session as it is now (a running
 * one with its new `deadline`); a refusal changed nothing.
 */
export type LifetimeOutcome =
  | { readonly outcome: 'changed'; readonly session: SessionView }
  | { readonly outcome: 'no_session' }
  /** The session would end after its start + the lifetime cap; `largestLifetimeMs` is the most allowed now. */
  | { readonly outcome: 'lifetime_too_long'; readonly largestLifetimeMs: number }
  /** A stop is under way (`stopping`): the session ends anyway, so its lifetime no longer changes. */
  | { readonly outcome: 'stopping'; readonly sessionId: string }
  /** The labels after the merge would be more than allowed. */
  | { readonly outcome: 'too_many_labels'; readonly count: number }
  | SessionMismatch;

/** A change to a live session ({@link SessionStore.update}): at least one of the two. */
export interface SessionChange {
  /** The new lifetime, ms: from now for a running session, from its start for a pending one. */
  readonly lifetimeMs?: number;
  /** Labels to merge into the session's; `null` removes a key. */
  readonly labels?: Readonly<Record<string, string | null>>;
}

/** What {@link SessionStore.recordActivity} answers. */
export type ActivityOutcome =
  | {
      readonly outcome: 'recorded';
      readonly sessionId: string;
      /** Only a running session's activity counts; a pending or stopping one is left as it is. */
      readonly state: LiveState;
      /** Its last activity now, epoch ms (undefined before it runs). */
      readonly lastActivityAt?: number;
    }
  | { readonly outcome: 'no_session' }
  | SessionMismatch;

/** What {@link SessionStore.requestStop} answers. */
export type StopOutcome =
  | { readonly outcome: 'stopped' | 'stopping'; readonly sessionId: string; readonly pool: string }
  | { readonly outcome: 'no_session' }
  | SessionMismatch;
