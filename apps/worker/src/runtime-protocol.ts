// The messages between a worker host and its session runtime (`session-runtime.ts`), sent over the
// Node.js IPC channel between the two processes. Times are absolute milliseconds on the machine's
// monotonic clock (CLOCK_MONOTONIC, the same in every process), so a message that arrives late still
// names the right instant: no duration is measured from when a message happened to be read.
import type { CgroupSpec } from './cgroups.js';

/** A session's own directory and whose it is. */
export interface SessionDir {
  readonly path: string;
  readonly uid: number;
  readonly gid: number;
}

/** Host → runtime. */
export type ToRuntime =
  | {
      readonly t: 'start';
      readonly id: string;
      /** Program and arguments: the containment's wrappers, then the session's command. */
      readonly argv: readonly string[];
      /** The session's whole environment. */
      readonly env: Readonly<Record<string, string>>;
      /** Working directory; undefined: the runtime's. */
      readonly cwd?: string;
      /** The session's cgroup(s), made before it starts and removed after it ends; undefined without caps. */
      readonly cgroup?: CgroupSpec;
      /** SESSION_DIR: made (mode 0711, owned by the session's user) before it starts, removed after it ends. */
      readonly dir?: SessionDir;
      /**
       * The session's network is `egress`: its program says on fd 4 once its network namespace is made,
       * the runtime then starts slirp4netns on it and answers once the network is configured.
       */
      readonly egress?: true;
      /** Output the session may send per second on average, bytes (bursts up to {@link OUTPUT_BURST_BYTES}). */
      readonly outputRate: number;
      /** SIGTERM → SIGKILL grace, ms. */
      readonly graceMs: number;
      /** The lifetime cap: SIGTERM then, SIGKILL `graceMs` later (monotonic ms). */
      readonly deadlineAt: number;
      /** The lease holds until then, less the safety margin: SIGKILL to the group then (monotonic ms). */
      readonly killBy: number;
    }
  /** A renewal got through: the lease now holds until `killBy` (monotonic ms, margin already taken off). */
  | { readonly t: 'lease'; readonly id: string; readonly killBy: number }
  /**
   * The same for many sessions at once (`[id, killBy]` pairs): a heartbeat moves the instant of every
   * session held under the host lease, and one message for them all keeps a stop from queuing behind
   * a thousand.
   */
  | { readonly t: 'leases'; readonly leases: ReadonlyArray<readonly [string, number]> }
  /** The session's lifetime was changed: its deadline is now `deadlineAt` (monotonic ms), sooner or later. */
  | { readonly t: 'deadline'; readonly id: string; readonly deadlineAt: number }
  /** SIGTERM to the group, SIGKILL after the grace time. */
  | { readonly t: 'term'; readonly id: string }
  /** SIGKILL to the group now. */
  | { readonly t: 'kill'; readonly id: string };

/** Why the runtime ended a session on its own, without being told to. */
export type RuntimeCause =
  /** No renewal arrived before `killBy`: the host is frozen, cut off from Redis, or too slow. */
  | 'lease'
  /** The lifetime cap passed and the host did not stop the session. */
  | 'deadline'
  /** The session could not be started (the program is missing, fork failed). */
  | 'spawn_failed';

/** Runtime → host. */
export type FromRuntime =
  /** The session's process started; it leads process group `pid`. */
  | { readonly t: 'started'; readonly id: string; readonly pid: number }
  /**
   * Lines the session printed, in order (a line over {@link MAX_LINE_BYTES} is cut and ends in
   * {@link CUT_MARK}; where output was dropped, a line `[output dropped: <n> bytes]` says so).
   */
  | {
      readonly t: 'out';
      readonly id: string;
      readonly stream: 'stdout' | 'stderr';
      readonly lines: readonly string[];
      /** Bytes the `[output dropped]` lines of this message account for. */
      readonly dropped?: number;
    }
  /**
   * The session announced on `SESSION_NOTIFY_FD` that it is ready, with the port the session proxy opens by
   * default (sent again only when the endpoint or the port changes).
   */
  | { readonly t: 'ready'; readonly id: string; readonly endpoint?: string; readonly port?: number }
  /**
   * The session was active at `at` (monotonic ms): it wrote `{"active": true}` or a readiness line on
   * `SESSION_NOTIFY_FD`. At most one every {@link ACTIVE_REPORT_MS} per session; the last one always
   * comes, so `at` of the latest report is the session's latest activity.
   */
  | { readonly t: 'active'; readonly id: string; readonly at: number }
  /** A line on `SESSION_NOTIFY_FD` that is neither readiness nor activity (the first few per session). */
  | { readonly t: 'notify_bad'; readonly id: string; readonly reason: string; readonly count: number }
  /**
   * The session's process exited (128 + signal number when killed); its group (and its namespace) has
   * been SIGKILLed. `oom`: the kernel killed a process of it for its memory cap.
   */
  | {
      readonly t: 'exit';
      readonly id: string;
      readonly code: number;
      readonly cause?: RuntimeCause;
      readonly oom?: boolean;
    };

/** Longest line of session output kept whole, bytes; a longer line is cut there. */
export const MAX_LINE_BYTES = 16_384;
/** Most output a session may send at once after a quiet spell, bytes. */
export const OUTPUT_BURST_BYTES = 1_048_576;
/** Activity of one session is reported to the host at most this often, ms (a later instant waits for the next slot). */
export const ACTIVE_REPORT_MS = 100;

const origin = process.hrtime.bigint();
const originMs = performance.now();

/** Now on the machine-wide monotonic clock, ms. */
export function monotonicNow(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

/** A `performance.now()` instant of this process on the machine-wide monotonic clock, ms. */
export function toMonotonic(performanceMs: number): number {
  return Number(origin) / 1e6 + (performanceMs - originMs);
}

/** A machine-wide monotonic instant as a `performance.now()` instant of this process, ms. */
export function fromMonotonic(monotonicMs: number): number {
  return monotonicMs - Number(origin) / 1e6 + originMs;
}
