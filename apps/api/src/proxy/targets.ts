// Where a session runs, for the proxy: read from Redis (the session's record names its host, the host's
// record its proxy listener), so every API process finds every session with no route table of its own
// to keep in step. Each answer is kept a second: a client hammering one session costs Redis one lookup
// a second per API process, and the host, asked for every new connection, refuses a session that ended
// meanwhile (`no_session`).
import type { Coordinator } from '@cq/coordinator';

export type ProxyTarget =
  | { readonly kind: 'running'; readonly userId: string; readonly workerId: string; readonly address: string }
  | { readonly kind: 'starting'; readonly userId: string }
  | { readonly kind: 'no_proxy'; readonly userId: string; readonly workerId: string }
  | { readonly kind: 'gone' };

/** How long one lookup is kept, ms. */
export const TARGET_TTL_MS = 1000;
/** Most lookups kept at once. */
export const TARGET_CACHE_SIZE = 10_000;

export class ProxyTargets {
  readonly #coordinator: Coordinator;
  readonly #cache = new Map<string, { at: number; target: Promise<ProxyTarget> }>();

  constructor(coordinator: Coordinator) {
    this.#coordinator = coordinator;
  }

  /** The session's target, from the cache while under a second old. */
  lookup(sessionId: string, now: number = Date.now()): Promise<ProxyTarget> {
    const kept = this.#cache.get(sessionId);
    if (kept !== undefined && now - kept.at < TARGET_TTL_MS) return kept.target;
    const target = this.#read(sessionId);
    if (this.#cache.size >= TARGET_CACHE_SIZE) this.#cache.delete(this.#cache.keys().next().value!);
    this.#cache.set(sessionId, { at: now, target });
    // A failed read is not kept.
    target.catch(() => this.#cache.delete(sessionId));
    return target;
  }

  /** Forgets what is kept of a session (its host was unreachable, or refused it). */
  forget(sessionId: string): void {
    this.#cache.delete(sessionId);
  }

  async #read(sessionId: string): Promise<ProxyTarget> {
    const found = await this.#coordinator.sessions.byId(sessionId);
    if (found === undefined || !found.live) return { kind: 'gone' };
    const { session } = found;
    // A stopping session still runs until its host has stopped it: the host says when it is gone.
    if (session.state === 'pending') return { kind: 'starting', userId: session.userId };
    if (session.workerId === undefined) return { kind: 'gone' };
    const address = await this.#coordinator.workers.proxyOf(session.workerId);
    if (address === undefined) return { kind: 'no_proxy', userId: session.userId, workerId: session.workerId };
    return { kind: 'running', userId: session.userId, workerId: session.workerId, address };
  }
}
