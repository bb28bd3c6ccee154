import { ScriptCode } from './errors.js';
import type { ScriptName } from './script-loader.js';

/** What the TypeScript side holds of one script's contract (its header in `lua/` is the full one). */
export interface ScriptSpec {
  /** `KEYS` it takes (also in its file name). */
  readonly keys: number;
  /** `ARGV` it takes. */
  readonly args: number;
  /** True when further `ARGV` may follow the first {@link args} (a batch, documented in its header). */
  readonly rest?: true;
  /** Every code its reply can start with (none: the reply is a rate-limit result, not a code). */
  readonly replies: readonly ScriptCode[];
}

/**
 * One row per script: keys, args and reply codes, checked against each script's header by
 * `lua-headers.test.ts` and against every call by the runner (a call with the wrong number of keys or
 * args is a bug, refused before it is sent).
 */
export const scriptTable: Readonly<Record<ScriptName, ScriptSpec>> = {
  acquireLease: { keys: 2, args: 3, replies: [ScriptCode.Ok, ScriptCode.LeaseHeld] },
  admit: {
    keys: 13,
    args: 10,
    replies: [
      ScriptCode.Ok,
      ScriptCode.TokenInvalid,
      ScriptCode.SessionExists,
      ScriptCode.Throttled,
      ScriptCode.Cancelled,
      ScriptCode.StateUncertain,
      ScriptCode.Unlisted,
    ],
  },
  appendOutput: { keys: 2, args: 4, rest: true, replies: [ScriptCode.Ok] },
  cancelAdmission: { keys: 7, args: 4, replies: [ScriptCode.Ok, ScriptCode.Stale] },
  claimSession: { keys: 8, args: 12, replies: [ScriptCode.Ok, ScriptCode.Stale, ScriptCode.PendingTimeout] },
  consumeToken: { keys: 1, args: 0, replies: [ScriptCode.Ok, ScriptCode.TokenInvalid] },
  createWebhook: { keys: 2, args: 2, replies: [ScriptCode.Ok] },
  drainWorker: { keys: 4, args: 1, replies: [ScriptCode.Ok, ScriptCode.NoHost] },
  dropDirectory: { keys: 2, args: 2, replies: [ScriptCode.Ok, ScriptCode.Stale] },
  enterDirectory: { keys: 3, args: 1, replies: [ScriptCode.Ok] },
  finishSession: { keys: 7, args: 13, replies: [ScriptCode.Ok, ScriptCode.Stale, ScriptCode.BadArgument] },
  fixedWindow: { keys: 1, args: 2, replies: [] },
  gcra: { keys: 1, args: 2, replies: [] },
  forgetHost: { keys: 2, args: 1, replies: [ScriptCode.Ok, ScriptCode.LeaseHeld] },
  heartbeatWorker: { keys: 8, args: 21, replies: [ScriptCode.Ok] },
  issueToken: { keys: 3, args: 10, replies: [ScriptCode.Ok, ScriptCode.Throttled] },
  readOutput: { keys: 3, args: 3, replies: [ScriptCode.Ok, ScriptCode.NoSession] },
  recordDelivery: { keys: 2, args: 3, replies: [ScriptCode.Ok] },
  readSession: { keys: 7, args: 3, replies: [ScriptCode.Ok, ScriptCode.NoSession] },
  markReady: { keys: 2, args: 4, replies: [ScriptCode.Ok, ScriptCode.LeaseLost] },
  moveWebhookCursor: {
    keys: 2,
    args: 2,
    replies: [ScriptCode.Ok, ScriptCode.LeaseLost, ScriptCode.Stale, ScriptCode.BadArgument],
  },
  probeSlot: { keys: 1, args: 2, replies: [ScriptCode.Ok] },
  publishEventMark: { keys: 0, args: 2, replies: [ScriptCode.Ok] },
  readCapacity: { keys: 3, args: 1, replies: [ScriptCode.Ok] },
  recordActivity: { keys: 7, args: 4, replies: [ScriptCode.Ok, ScriptCode.NoSession, ScriptCode.SessionMismatch] },
  releaseLease: { keys: 1, args: 1, replies: [ScriptCode.Ok, ScriptCode.LeaseLost] },
  releaseSlots: { keys: 1, args: 1, replies: [ScriptCode.Ok] },
  nudgeHost: { keys: 1, args: 2, replies: [ScriptCode.Ok] },
  recountCapacity: { keys: 1, args: 0, replies: [ScriptCode.Ok] },
  renewLease: { keys: 1, args: 2, replies: [ScriptCode.Ok, ScriptCode.LeaseLost, ScriptCode.DeadlineReached] },
  renewSession: { keys: 5, args: 8, replies: [ScriptCode.Ok, ScriptCode.LeaseLost, ScriptCode.DeadlineReached] },
  requestStop: { keys: 7, args: 5, replies: [ScriptCode.Ok, ScriptCode.NoSession, ScriptCode.SessionMismatch] },
  reserveSlot: { keys: 3, args: 4, replies: [ScriptCode.Ok, ScriptCode.NoCapacity] },
  slidingWindow: { keys: 1, args: 2, replies: [] },
  renewSweepTurn: { keys: 1, args: 2, replies: [ScriptCode.Ok, ScriptCode.LeaseLost] },
  sweepHosts: { keys: 2, args: 3, replies: [ScriptCode.Ok] },
  sweepSession: { keys: 7, args: 5, replies: [ScriptCode.Ok, ScriptCode.NoSession] },
  unlistSlot: { keys: 2, args: 1, replies: [ScriptCode.Ok, ScriptCode.Stale] },
  updateSession: {
    keys: 7,
    args: 9,
    replies: [
      ScriptCode.Ok,
      ScriptCode.NoSession,
      ScriptCode.LifetimeTooLong,
      ScriptCode.SessionStopping,
      ScriptCode.SessionMismatch,
      ScriptCode.TooManyLabels,
    ],
  },
};
