import type { Containment, Coordinator, IndexSnapshot } from '@cq/coordinator';
import type { StatsRecorder } from '../stats.js';

/** One live session as the dashboard shows it. */
export interface LiveRow {
  userId: string;
  sessionId: string;
  fence: number;
  state: string;
  workerId?: string;
  startedAt?: number;
  /** Ms until the lease runs out unless renewed (running sessions). */
  leaseLeftMs?: number;
  /** Ms until the lifetime cap (running sessions). */
  lifetimeLeftMs?: number;
  /** Ms until a pending session is dropped as lost. */
  pendingLeftMs?: number;
  /** The session announced it is ready, and where it can be reached. */
  ready: boolean;
  endpoint?: string;
}

/** What `GET /dashboard/api/state` answers. */
export interface DashboardState {
  now: number;
  live: { total: number; offset: number; limit: number; filter: string; rows: LiveRow[] };
  workers: Array<{
    workerId: string;
    state: 'active' | 'draining';
    slots: number;
    busy: number;
    heartbeatAgeMs: number;
    startedAt: number;
    /** How the host keeps a session's processes inside it. */
    containment: Containment;
  }>;
  /** Slots of live, not draining hosts, less the sessions admitted and not yet ended. */
  freeSlots: number;
  ended: Array<{
    userId: string;
    sessionId: string;
    fence: number;
    state: string;
    exitCode?: number;
    reason?: string;
    endedAt: number;
    workerId?: string;
  }>;
  chart: Array<{
    minute: number;
    admitted: number;
    throttled: number;
    tokenInvalid: number;
    sessionExists: number;
    noCapacity: number;
    tokensThrottled: number;
  }>;
}

/**
 * Builds the dashboard's state from the coordinator's indexes. The index read (2 × 16384 pipelined
 * commands) is shared by every viewer and made at most once per `minIntervalMs`.
 */
export class DashboardStateReader {
  readonly #coordinator: Coordinator;
  readonly #stats: StatsRecorder;
  readonly #minIntervalMs: number;
  #snapshot: { at: number; value: Promise<IndexSnapshot> } | undefined;

  constructor(coordinator: Coordinator, stats: StatsRecorder, minIntervalMs = 1000) {
    this.#coordinator = coordinator;
    this.#stats = stats;
    this.#minIntervalMs = minIntervalMs;
  }

  #index(): Promise<IndexSnapshot> {
    const now = performance.now();
    if (this.#snapshot === undefined || now - this.#snapshot.at >= this.#minIntervalMs) {
      const value = this.#coordinator.readIndex();
      this.#snapshot = { at: now, value };
      value.catch(() => {
        if (this.#snapshot?.value === value) this.#snapshot = undefined;
      });
    }
    return this.#snapshot.value;
  }

  async read(query: { filter: string; offset: number; limit: number }): Promise<DashboardState> {
    const [index, workers, capacity, chart] = await Promise.all([
      this.#index(),
      this.#coordinator.workers.list(),
      this.#coordinator.workers.capacity(),
      this.#stats.read(15),
    ]);
    const now = Date.now();
    const matching = index.live
      .filter((u) => query.filter === '' || u.userId.includes(query.filter))
      .sort((a, b) => (a.userId < b.userId ? -1 : 1));
    const page = matching.slice(query.offset, query.offset + query.limit);
    const sessions = await Promise.all(page.map((u) => this.#coordinator.sessions.settleAndRead(u.userId)));
    const rows: LiveRow[] = [];
    for (const session of sessions) {
      if (session === undefined) continue;
      rows.push({
        userId: session.userId,
        sessionId: session.sessionId,
        fence: session.fence,
        state: session.state,
        ready: session.ready,
        ...(session.endpoint === undefined ? {} : { endpoint: session.endpoint }),
        ...(session.workerId === undefined ? {} : { workerId: session.workerId }),
        ...(session.startedAt === undefined ? {} : { startedAt: session.startedAt }),
        ...(session.leaseExpiresAt === undefined ? {} : { leaseLeftMs: session.leaseExpiresAt - now }),
        ...(session.deadline === undefined ? {} : { lifetimeLeftMs: session.deadline - now }),
        ...(session.pendingDeadline === undefined ? {} : { pendingLeftMs: session.pendingDeadline - now }),
      });
    }
    return {
      now,
      live: { total: matching.length, offset: query.offset, limit: query.limit, filter: query.filter, rows },
      workers: workers.map((w) => ({
        workerId: w.workerId,
        state: w.state,
        slots: w.slots,
        busy: w.busy,
        heartbeatAgeMs: now - w.seenAt,
        startedAt: w.startedAt,
        containment: w.containment,
      })),
      freeSlots: capacity.free,
      ended: index.ended
        .filter((e) => query.filter === '' || e.userId.includes(query.filter))
        .slice(0, 50)
        .map((e) => ({
          userId: e.userId,
          sessionId: e.sessionId,
          fence: e.fence,
          state: e.state,
          endedAt: e.endedAt,
          ...(e.exitCode === undefined ? {} : { exitCode: e.exitCode }),
          ...(e.reason === undefined ? {} : { reason: e.reason }),
          ...(e.workerId === undefined ? {} : { workerId: e.workerId }),
        })),
      chart: chart.map((m) => ({
        minute: m.minute,
        admitted: m.counts.admitted,
        throttled: m.counts.throttled,
        tokenInvalid: m.counts.token_invalid,
        sessionExists: m.counts.session_exists,
        noCapacity: m.counts.no_capacity,
        tokensThrottled: m.counts.tokens_throttled,
      })),
    };
  }
}
