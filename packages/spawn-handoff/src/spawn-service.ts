import {
  UnavailableError,
  withTimeout,
  type AdmitOutcome,
  type SessionStore,
  type WorkerRegistry,
} from '@cq/coordinator';
import type { SpawnProducer } from './producer.js';
import type { SpawnLogger } from './logger.js';
import { AdmissionReconciler } from './reconciler.js';

/** Options of {@link SpawnService}. */
export interface SpawnServiceOptions {
  sessions: Pick<SessionStore, 'admit' | 'cancelAdmission' | 'settleAndRead' | 'sessionIdForToken'>;
  producer: SpawnProducer;
  log: SpawnLogger;
  /**
   * The capacity check: each admitted session must hold a free slot (see {@link WorkerRegistry.reserve})
   * for `holdMs`, until a worker host that runs it renews the hold; with none free the admission is
   * rolled back (`no_capacity`). Without it, admissions hold nothing (`CAPACITY_CHECK=false`).
   */
  capacity?: {
    workers: Pick<WorkerRegistry, 'reserve' | 'release'>;
    /** How long a hold lasts unless renewed, ms: the pending timeout plus a margin for the claiming host's heartbeat. */
    holdMs: number;
  };
  /**
   * Every spawn is decided within this many ms of its arrival (the contract's 2 s for a 503, less a
   * margin): the enqueue and, when it fails, the rollback share what the admission left of it.
   * @defaultValue 1500
   */
  answerWithinMs?: number;
  /** The least time a step after the admission gets, ms, even when the admission used up the budget. @defaultValue 100 */
  stepMinMs?: number;
}

/** What a `no_capacity` refusal advises: slots free as sessions end, which nothing predicts; look again in a second. */
export const NO_CAPACITY_RETRY_MS = 1000;

/**
 * What a refusal for a pool no live host takes sessions of advises: a host that starts (or stops
 * draining) counts with its first heartbeat, but that takes an operator, or a mistyped pool a new token.
 */
export const POOL_UNSERVED_RETRY_MS = 10_000;

/** How a spawn ended: what the HTTP route maps to a status, and nothing else. */
export type SpawnOutcome =
  | Exclude<AdmitOutcome, { outcome: 'admitted' }>
  | (Extract<AdmitOutcome, { outcome: 'admitted' }> & {
      /** The enqueue's answer was lost, but a worker host had already taken the job. */
      readonly confirmedByWorker: boolean;
    })
  | {
      /** No worker slot of the session's pool was free: the admission was rolled back, the token is valid again. */
      readonly outcome: 'no_capacity';
      readonly retryAfterMs: number;
      readonly pool: string;
      /** Whether any live, not draining host takes sessions of the pool (its slots are all taken) or none does. */
      readonly served: boolean;
    }
  | {
      readonly outcome: 'unavailable';
      /**
       * `rolled_back`: the token is valid again; `deferred`: Redis did not answer the rollback in
       * time, the reconciler finishes it; `unconfirmed`: the admission is gone (lost in a failover).
       */
      readonly why: 'rolled_back' | 'deferred' | 'unconfirmed';
      readonly message: string;
    };

/**
 * The hand-off from a token to a queued session, as one saga: admit (one script) → enqueue the spawn
 * job within the answer budget → on failure roll the admission back, so the token works again → when
 * Redis cannot even answer the rollback, leave it to the {@link AdmissionReconciler} → when the
 * rollback finds the session no longer pending, read what Redis holds: a worker host may have taken
 * the job whose enqueue answer was lost. An admission whose own answer was lost to a Redis timeout is
 * also reconciled, and its `UnavailableError` rethrown.
 */
export class SpawnService {
  readonly reconciler: AdmissionReconciler;
  readonly #options: SpawnServiceOptions;
  readonly #answerWithinMs: number;
  readonly #stepMinMs: number;

  constructor(options: SpawnServiceOptions) {
    this.#options = options;
    this.#answerWithinMs = options.answerWithinMs ?? 1500;
    this.#stepMinMs = options.stepMinMs ?? 100;
    this.reconciler = new AdmissionReconciler(options.sessions, options.log);
  }

  async spawn(token: string): Promise<SpawnOutcome> {
    const { sessions, producer, capacity } = this.#options;
    const sessionId = sessions.sessionIdForToken(token);
    const deadline = performance.now() + this.#answerWithinMs;
    const left = (): number => Math.max(this.#stepMinMs, Math.round(deadline - performance.now()));
    let admission: AdmitOutcome;
    try {
      admission = await sessions.admit(token, {}, sessionId);
    } catch (err) {
      // The admission may still run once Redis answers again: cancel it then, so the token stays valid.
      if (err instanceof UnavailableError) this.reconciler.add(token, sessionId);
      throw err;
    }
    if (admission.outcome !== 'admitted') return admission;
    const log = this.#options.log.child({
      userId: admission.userId,
      sessionId: admission.sessionId,
      fence: admission.fence,
    });
    if (capacity !== undefined) {
      // A slot for the session, decided in the capacity's own cluster slot after the admission, so
      // the refusals that need no slot (403, 409, 429) cost one round trip; a refused hold undoes the admission.
      const hold = await withTimeout(
        capacity.workers.reserve(admission.sessionId, capacity.holdMs, true, admission.pool),
        left(),
        'capacity',
      ).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
      if (hold instanceof Error || hold.outcome === 'no_capacity') {
        const failure = hold instanceof Error ? hold : undefined;
        const rollback = await this.#rollBack(token, admission.sessionId, left);
        // A hold whose answer was lost may still have been taken: give it back (it runs out by itself otherwise).
        if (hold instanceof Error) this.#giveBack(admission.sessionId, admission.pool);
        if (!(hold instanceof Error) && rollback !== 'deferred') {
          log.debug({ rollback, pool: admission.pool }, 'no worker slot free; admission rolled back');
          const served = hold.total > 0;
          const retryAfterMs = served ? NO_CAPACITY_RETRY_MS : POOL_UNSERVED_RETRY_MS;
          return { outcome: 'no_capacity', retryAfterMs, pool: admission.pool, served };
        }
        log.warn({ err: failure, rollback }, 'capacity check failed; admission rolled back');
        return this.#unavailable(rollback === 'deferred' ? 'deferred' : 'rolled_back');
      }
    }
    try {
      await withTimeout(
        producer.enqueue({
          userId: admission.userId,
          sessionId: admission.sessionId,
          fence: admission.fence,
          pool: admission.pool,
        }),
        left(),
        'enqueue',
      );
      return { ...admission, confirmedByWorker: false };
    } catch (err) {
      const enqueueError = err;
      // The session could not be handed on: roll the admission back so the token works again.
      const rollback = await this.#rollBack(token, admission.sessionId, left);
      if (rollback === 'deferred') {
        log.warn({ err: enqueueError }, 'enqueue failed; rollback deferred');
        return this.#unavailable('deferred');
      }
      if (rollback === 'cancelled') {
        this.#giveBack(admission.sessionId, admission.pool);
        log.warn({ err: enqueueError, rollback }, 'enqueue failed; admission rolled back');
        return this.#unavailable('rolled_back');
      }
      // Not pending any more: the job did reach a worker host (only its answer was lost), or the
      // admission itself was lost in a failover. Answer what Redis holds.
      const live = await withTimeout(sessions.settleAndRead(admission.userId), left(), 'session read').catch(
        () => undefined,
      );
      if (live?.sessionId !== admission.sessionId) {
        log.warn({ err: enqueueError, rollback }, 'enqueue failed and the admission is gone');
        return this.#unavailable('unconfirmed');
      }
      log.info({ err: enqueueError }, 'enqueue answer lost, but a worker host already took the session');
      return { ...admission, confirmedByWorker: true };
    }
  }

  /**
   * Rolls an admission back within the budget: `cancelled` (the token is valid again), `stale` (the
   * session is not pending any more), or `deferred` (Redis did not answer in time; the reconciler
   * finishes it).
   */
  async #rollBack(token: string, sessionId: string, left: () => number): Promise<'cancelled' | 'stale' | 'deferred'> {
    try {
      const result = await withTimeout(this.#options.sessions.cancelAdmission(token, sessionId), left(), 'rollback');
      return result.cancelled ? 'cancelled' : 'stale';
    } catch {
      this.reconciler.add(token, sessionId);
      return 'deferred';
    }
  }

  /** Gives back the slot held for a session that was not handed on; a hold not given back runs out by itself. */
  #giveBack(sessionId: string, pool: string): void {
    void this.#options.capacity?.workers.release([sessionId], pool).catch(() => {});
  }

  #unavailable(why: 'rolled_back' | 'deferred' | 'unconfirmed'): SpawnOutcome {
    const message = {
      rolled_back: 'The spawn queue is unavailable; the token is still valid, retry shortly.',
      deferred:
        'The spawn queue is unavailable; retry shortly with the same token (once the admission is rolled back it works again).',
      unconfirmed:
        'The spawn queue is unavailable and the admission could not be confirmed; look up the session, or retry with a new token.',
    }[why];
    return { outcome: 'unavailable', why, message };
  }

  /** One last, bounded attempt at the admissions left to reconcile. */
  async close(): Promise<void> {
    await this.reconciler.close();
  }
}
