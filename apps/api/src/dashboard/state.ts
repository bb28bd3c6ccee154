import type { Containment, Coordinator, Isolation, WorkerRecord } from '@cq/coordinator';
import { sessionFields, type ListQuery, type SessionFields, type SessionListReader } from '../session-list.js';
import { poolsWithPending, type PoolWithPending, type QueuedSessions } from '../pools.js';
import type { StatsRecorder } from '../stats.js';
import type { RecentEvents } from './recent-events.js';

/**
 * One live session as the dashboard shows it: the fields `GET /v1/sessions` shows as they are
 * ({@link sessionFields}), then its start (epoch ms) and what is left of its lease, lifetime or wait for
 * a host, in ms from the state's `now`.
 */
export type LiveRow = SessionFields & {
  startedAt?: number;
  /** Ms until the lease runs out unless renewed (running sessions). */
  leaseLeftMs?: number;
  /** Ms until the lifetime cap (running sessions). */
  lifetimeLeftMs?: number;
  /** Ms until a pending session is dropped as lost. */
  pendingLeftMs?: number;
};

export type { QueuedSessions } from '../pools.js';

/** What `GET /dashboard/api/state` answers. */
export interface DashboardState {
  now: number;
  /** A page of the session list (`GET /v1/sessions`'s walk): `next` is the cursor of the following one. */
  live: { limit: number; rows: LiveRow[]; next?: string };
  /** Every pool with a live host or a session waiting. */
  pools: PoolWithPending[];
  workers: Array<{
    workerId: string;
    pool: string;
    state: 'active' | 'draining';
    slots: number;
    busy: number;
    heartbeatAgeMs: number;
    startedAt: number;
    /** How the host keeps a session's processes inside it. */
    containment: Containment;
    /** How the host keeps its sessions apart from it and from each other. */
    isolation: Isolation;
  }>;
  /** Slots of live, not draining hosts, less the sessions admitted and not yet ended (every pool's). */
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
 * Builds the dashboard's state. The live table is a page of the session list, read by `GET /v1/sessions`'
 * own reader (the same filter, walk and cursors): it costs Redis in proportion to the page, whatever the
 * number of sessions or slots. The recent endings come from the process's ring of recent events (no read of
 * Redis once it is up); the hosts, capacity and chart are a few commands.
 */
export class DashboardStateReader {
  readonly #list: SessionListReader;
  readonly #coordinator: Coordinator;
  readonly #stats: StatsRecorder;
  readonly #recent: RecentEvents;
  readonly #queued: QueuedSessions;

  constructor(
    list: SessionListReader,
    coordinator: Coordinator,
    stats: StatsRecorder,
    recent: RecentEvents,
    queued: QueuedSessions,
  ) {
    this.#list = list;
    this.#coordinator = coordinator;
    this.#stats = stats;
    this.#recent = recent;
    this.#queued = queued;
  }

  async read(query: ListQuery): Promise<DashboardState> {
    // One read of the hosts serves the hosts table and the pools (which would read them again).
    const readPools = async (): Promise<[WorkerRecord[], PoolWithPending[]]> => {
      const hosts = await this.#coordinator.workers.list();
      return [hosts, await poolsWithPending(this.#coordinator.workers, this.#queued, hosts)];
    };
    const [page, [workers, pools], chart, endings] = await Promise.all([
      this.#list.page(query),
      readPools(),
      this.#stats.read(15),
      this.#recent.endings().catch(() => []),
    ]);
    const now = Date.now();
    const rows: LiveRow[] = page.sessions.map((session) => ({
      ...sessionFields(session),
      ...(session.startedAt === undefined ? {} : { startedAt: session.startedAt }),
      ...(session.leaseExpiresAt === undefined ? {} : { leaseLeftMs: session.leaseExpiresAt - now }),
      ...(session.deadline === undefined ? {} : { lifetimeLeftMs: session.deadline - now }),
      ...(session.pendingDeadline === undefined ? {} : { pendingLeftMs: session.pendingDeadline - now }),
    }));
    return {
      now,
      live: {
        limit: query.limit,
        rows,
        ...(page.next === undefined ? {} : { next: page.next }),
      },
      pools,
      workers: workers.map((w) => ({
        workerId: w.workerId,
        pool: w.pool,
        state: w.state,
        slots: w.slots,
        busy: w.busy,
        heartbeatAgeMs: now - w.seenAt,
        startedAt: w.startedAt,
        containment: w.containment,
        isolation: w.isolation,
      })),
      freeSlots: pools.reduce((n, p) => n + p.free, 0),
      ended: endings
        .filter((e) => page.filter.userId === undefined || e.userId === page.filter.userId)
        .slice(0, 50)
        .map((e) => ({
          userId: e.userId,
          sessionId: e.sessionId,
          fence: e.fence,
          state: e.type,
          endedAt: e.at,
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
