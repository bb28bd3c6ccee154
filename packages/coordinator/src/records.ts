// The layouts of the hashes the Lua scripts write, defined once, with the decoder the library reads
// them through. Field names are short because they are stored once per live session; the test beside
// this file checks that the scripts write exactly these names.
import type { HistoryEntry, Labels, LiveState, SessionView } from './session-types.js';
import type { Metadata } from './tokens.js';

/**
 * The session hash, `<prefix>:{u:<userId>}:session`. `admit-13.lua` writes the admission fields,
 * `claimSession-8.lua` the running fields (`hard`, the lease's hard deadline, among them),
 * `renewSession-5.lua` moves `act` (and sets `stop` to `idle`; it moves the lease and the live index,
 * not `leaseExp`: readers take it from the live index, scored alike), `recordActivity-7.lua` moves `act`,
 * `requestStop-7.lua` sets `stop`, `updateSession-7.lua` changes `life` (and a running session's
 * `deadline` and `hard`) and `lab`.
 */
export const SessionField = {
  id: 'id',
  userId: 'user',
  fence: 'fence',
  state: 'state',
  createdAt: 'created',
  /** Until when a pending session may wait for a worker (epoch ms). */
  pendingDeadline: 'pdl',
  lifetimeMs: 'life',
  metadata: 'meta',
  /** The token's own lifetime, expiry and the throttle's previous state: what `cancelAdmission` restores. */
  tokenLifetimeMs: 'tokL',
  tokenExpiresAt: 'tokE',
  previousThrottle: 'ptat',
  workerId: 'worker',
  owner: 'owner',
  startedAt: 'started',
  deadline: 'deadline',
  leaseExpiresAt: 'leaseExp',
  /** Why a stop was asked for: `requested` (through the API) or `idle` (its idle timeout passed). */
  stopRequested: 'stop',
  /** Idle timeout, ms (the token's, else IDLE_TIMEOUT_MS at issue); '0' or absent: never idle. */
  idleTimeoutMs: 'idle',
  /** Last activity of a running session (epoch ms): its start, then what its host or the API reported. */
  lastActivityAt: 'act',
  /** '1' once the session announced it is ready (markReady). */
  ready: 'ready',
  /** Where the session can be reached, as it announced ('' for nowhere in particular). */
  endpoint: 'endpoint',
  /** The port it announced for the session proxy ('' or absent: none). */
  port: 'port',
  /** The slot's loss guard as its admission found it, stamped with the Redis process (lua/includes/lossGuard.lua). */
  lossStamp: 'g',
  /** Its labels, JSON; absent on a session admitted before sessions had labels ('{}'). */
  labels: 'lab',
  /** Its pool; absent: `default`. */
  pool: 'pool',
  /** When its token was issued (epoch ms): what `cancelAdmission` restores. */
  tokenIssuedAt: 'tokA',
} as const;

/** The lease hash, `<prefix>:{u:<userId>}:lease` (and a plain lease's): owner, fencing token, hard deadline. */
export const LeaseField = { owner: 'o', fence: 'f', hardDeadline: 'd' } as const;

const liveStates: readonly LiveState[] = ['pending', 'running', 'stopping'];

/** An optional number field: absent or empty is undefined. */
export function optionalNumber(value: string | undefined): number | undefined {
  return value === undefined || value === '' ? undefined : Number(value);
}

/** A labels field (JSON); absent is `{}`. */
export function parseLabels(json: string | undefined): Labels {
  return json === undefined || json === '' ? {} : (JSON.parse(json) as Labels);
}

/** A history entry as the scripts write it (JSON); one written before sessions had labels and pools gets their defaults. */
export function parseHistoryEntry(json: string): HistoryEntry {
  const entry = JSON.parse(json) as Partial<HistoryEntry> & Omit<HistoryEntry, 'pool' | 'labels'>;
  return { ...entry, pool: entry.pool ?? 'default', labels: entry.labels ?? {} };
}

/** A metadata field (JSON); absent is `{}`. */
export function parseMetadata(json: string | undefined): Metadata {
  return json === undefined ? {} : (JSON.parse(json) as Metadata);
}

/**
 * The view of a session hash given as a flat `[field, value, field, value, …]` list (HGETALL's shape);
 * undefined when the hash does not hold a live session.
 */
export function decodeSession(userId: string, flat: readonly unknown[]): SessionView | undefined {
  const h = new Map<string, string>();
  for (let i = 0; i + 1 < flat.length; i += 2) h.set(String(flat[i]), String(flat[i + 1]));
  const state = liveStates.find((live) => live === h.get(SessionField.state));
  const sessionId = h.get(SessionField.id);
  if (state === undefined || sessionId === undefined) return undefined;
  const view: { -readonly [K in keyof SessionView]: SessionView[K] } = {
    sessionId,
    userId,
    fence: Number(h.get(SessionField.fence)),
    state,
    pool: h.get(SessionField.pool) ?? 'default',
    labels: parseLabels(h.get(SessionField.labels)),
    createdAt: Number(h.get(SessionField.createdAt)),
    lifetimeMs: Number(h.get(SessionField.lifetimeMs)),
    metadata: parseMetadata(h.get(SessionField.metadata)),
    ready: h.get(SessionField.ready) === '1',
  };
  const endpoint = h.get(SessionField.endpoint);
  if (endpoint !== undefined && endpoint !== '') view.endpoint = endpoint;
  const port = optionalNumber(h.get(SessionField.port));
  if (port !== undefined) view.port = port;
  const pendingDeadline = state === 'pending' ? optionalNumber(h.get(SessionField.pendingDeadline)) : undefined;
  if (pendingDeadline !== undefined) view.pendingDeadline = pendingDeadline;
  const workerId = h.get(SessionField.workerId);
  if (workerId !== undefined) view.workerId = workerId;
  const startedAt = optionalNumber(h.get(SessionField.startedAt));
  if (startedAt !== undefined) view.startedAt = startedAt;
  const leaseExpiresAt = optionalNumber(h.get(SessionField.leaseExpiresAt));
  if (leaseExpiresAt !== undefined) view.leaseExpiresAt = leaseExpiresAt;
  const deadline = optionalNumber(h.get(SessionField.deadline));
  if (deadline !== undefined) view.deadline = deadline;
  const idleTimeoutMs = optionalNumber(h.get(SessionField.idleTimeoutMs));
  if (idleTimeoutMs !== undefined && idleTimeoutMs > 0) view.idleTimeoutMs = idleTimeoutMs;
  const lastActivityAt = optionalNumber(h.get(SessionField.lastActivityAt));
  if (lastActivityAt !== undefined) view.lastActivityAt = lastActivityAt;
  const stopRequested = h.get(SessionField.stopRequested);
  if (stopRequested !== undefined) view.stopRequested = stopRequested;
  return view;
}
