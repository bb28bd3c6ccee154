import { randomUUID } from 'node:crypto';
import { UnavailableError, withTimeout, type AdmitOutcome, type SessionStore } from '@cq/coordinator';
import type { SpawnProducer } from './producer.js';
import type { SpawnLogger } from './logger.js';
import { AdmissionReconciler } from './reconciler.js';

/** Options of {@link SpawnService}. */
export interface SpawnServiceOptions {
  sessions: Pick<SessionStore, 'admit' | 'cancelAdmission' | 'settleAndRead'>;
  producer: SpawnProducer;
  log: SpawnLogger;
  /**
   * Every spawn is decided within this many ms of its arrival (the contract's 2 s for a 503, less a
   * margin): the enqueue and, when it fails, the rollback share what the admission left of it.
   * @defaultValue 1500
   */
  answerWithinMs?: number;
  /** The least time a step after the admission gets, ms, even when the admission used up the budget. @defaultValue 100 */
  stepMinMs?: number;
}

/** How a spawn ended: what the HTTP route maps to a status, and nothing else. */
export type SpawnOutcome =
  | Exclude<AdmitOutcome, { outcome: 'admitted' }>
  | (Extract<AdmitOutcome, { outcome: 'admitted' }> & {
      /** The enqueue's answer was lost, but a worker host had already taken the job. */
      readonly confirmedByWorker: boolean;
    })
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
    const { sessions, producer } = this.#options;
    const sessionId = randomUUID();
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
    try {
      await withTimeout(
        producer.enqueue({ userId: admission.userId, sessionId: admission.sessionId, fence: admission.fence }),
        left(),
        'enqueue',
      );
      return { ...admission, confirmedByWorker: false };
    } catch (err) {
      const enqueueError = { message: (err as Error).message };
      // The session could not be handed on: roll the admission back so the token works again.
      const rollback = await withTimeout(
        sessions.cancelAdmission(token, admission.sessionId),
        left(),
        'rollback',
      ).catch((cause: unknown) => (cause instanceof Error ? cause : new Error(String(cause))));
      if (rollback instanceof Error) {
        // Redis is unreachable, or too slow to answer in time: cancel later, if the session is still pending then.
        this.reconciler.add(token, admission.sessionId);
        log.warn({ err: enqueueError, rollback: rollback.message }, 'enqueue failed; rollback deferred');
        return {
          outcome: 'unavailable',
          why: 'deferred',
          message:
            'The spawn queue is unavailable; retry shortly with the same token (once the admission is rolled back it works again).',
        };
      }
      if (rollback.cancelled) {
        log.warn({ err: enqueueError, rollback }, 'enqueue failed; admission rolled back');
        return {
          outcome: 'unavailable',
          why: 'rolled_back',
          message: 'The spawn queue is unavailable; the token is still valid, retry shortly.',
        };
      }
      // Not pending any more: the job did reach a worker host (only its answer was lost), or the
      // admission itself was lost in a failover. Answer what Redis holds.
      const live = await withTimeout(sessions.settleAndRead(admission.userId), left(), 'session read').catch(
        () => undefined,
      );
      if (live?.sessionId !== admission.sessionId) {
        log.warn({ err: enqueueError, rollback }, 'enqueue failed and the admission is gone');
        return {
          outcome: 'unavailable',
          why: 'unconfirmed',
          message:
            'The spawn queue is unavailable and the admission could not be confirmed; look up the session, or retry with a new token.',
        };
      }
      log.info({ err: enqueueError }, 'enqueue answer lost, but a worker host already took the session');
      return { ...admission, confirmedByWorker: true };
    }
  }

  /** One last, bounded attempt at the admissions left to reconcile. */
  async close(): Promise<void> {
    await this.reconciler.close();
  }
}
