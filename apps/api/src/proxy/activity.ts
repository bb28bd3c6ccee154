// Requests and WebSocket messages through the proxy are activity for the session's idle timeout. They
// are coalesced: one Redis write per session per second at most, from each API process.
import type { Coordinator } from '@cq/coordinator';
import type { Logger } from 'pino';

/** Least time between two activity writes for one session, ms. */
export const ACTIVITY_EVERY_MS = 1000;

export class ProxyActivity {
  readonly #coordinator: Coordinator;
  readonly #logger: Logger;
  /** When each session's activity was last written (or is due). */
  readonly #last = new Map<string, number>();
  readonly #pending = new Map<string, NodeJS.Timeout>();

  constructor(coordinator: Coordinator, logger: Logger) {
    this.#coordinator = coordinator;
    this.#logger = logger;
  }

  /** The session was used now. */
  touch(userId: string, sessionId: string, now: number = Date.now()): void {
    if (this.#pending.has(sessionId)) return;
    const last = this.#last.get(sessionId) ?? -Infinity;
    const wait = last + ACTIVITY_EVERY_MS - now;
    if (wait <= 0) {
      this.#write(userId, sessionId, now);
      return;
    }
    // The latest activity within the second is written at its end.
    const timer = setTimeout(() => {
      this.#pending.delete(sessionId);
      this.#write(userId, sessionId, Date.now());
    }, wait);
    timer.unref();
    this.#pending.set(sessionId, timer);
  }

  #write(userId: string, sessionId: string, now: number): void {
    this.#last.set(sessionId, now);
    if (this.#last.size > 50_000)
      for (const [id, at] of this.#last) if (now - at > ACTIVITY_EVERY_MS) this.#last.delete(id);
    this.#coordinator.sessions
      .recordActivity(userId, { sessionId })
      .catch((err: Error) => this.#logger.debug({ err, sessionId }, 'could not record proxied activity'));
  }

  close(): void {
    for (const timer of this.#pending.values()) clearTimeout(timer);
    this.#pending.clear();
  }
}
