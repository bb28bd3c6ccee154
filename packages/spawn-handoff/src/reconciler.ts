import { UnavailableError, type SessionStore } from '@cq/coordinator';
import { settleWithin } from '@cq/service-kit';
import type { SpawnLogger } from './logger.js';

/** How long an unanswered admission is retried for, ms (the tombstone lives 10 minutes). */
const GIVE_UP_MS = 9 * 60_000;

/**
 * Admissions whose answer was lost to a Redis timeout may still run later (a hung Redis executes the
 * commands it had received once it resumes). The API answered 503 and promised the token stays
 * valid, so each such admission is cancelled as soon as Redis answers again: the rollback restores
 * the token if the admission ran, and its tombstone turns a later copy into a no-op.
 */
export class AdmissionReconciler {
  readonly #sessions: Pick<SessionStore, 'cancelAdmission'>;
  readonly #log: SpawnLogger;
  readonly #pending = new Map<string, { token: string; since: number }>();
  #timer: NodeJS.Timeout | undefined;
  #running = false;

  constructor(sessions: Pick<SessionStore, 'cancelAdmission'>, log: SpawnLogger) {
    this.#sessions = sessions;
    this.#log = log;
  }

  /** Number of admissions still to reconcile. */
  get size(): number {
    return this.#pending.size;
  }

  /** Remembers an admission whose answer was lost. */
  add(token: string, sessionId: string): void {
    this.#pending.set(sessionId, { token, since: performance.now() });
    this.#timer ??= setInterval(() => void this.run(), 500);
    this.#timer.unref();
  }

  /** Tries every pending reconciliation once. */
  async run(): Promise<void> {
    if (this.#running) return;
    this.#running = true;
    try {
      for (const [sessionId, { token, since }] of [...this.#pending]) {
        try {
          const result = await this.#sessions.cancelAdmission(token, sessionId);
          this.#pending.delete(sessionId);
          if (result.cancelled)
            this.#log.info({ sessionId }, 'admission lost to a timeout was rolled back; the token is valid again');
        } catch (err) {
          if (!(err instanceof UnavailableError) || performance.now() - since > GIVE_UP_MS) {
            this.#pending.delete(sessionId);
            this.#log.error({ sessionId, err }, 'could not reconcile an admission');
          }
          if (err instanceof UnavailableError) break; // Redis still away: try again at the next tick
        }
      }
    } finally {
      this.#running = false;
      if (this.#pending.size === 0 && this.#timer !== undefined) {
        clearInterval(this.#timer);
        this.#timer = undefined;
      }
    }
  }

  /** One last, bounded attempt on shutdown. */
  async close(): Promise<void> {
    clearInterval(this.#timer);
    this.#timer = undefined;
    if (this.#pending.size > 0) await settleWithin(this.run(), 1000);
  }
}
