// The timing constants of liveness that the Lua scripts use, named once here: each reaches its scripts as
// an argument (as BullMQ passes its prefix and limits), so no number is written in both languages.

/**
 * A session's lease when nothing says otherwise, ms: the worker host's `LEASE_MS` default, and the lease
 * the loss guard waits out after Redis may have lost writes in a slot where no claim told it the lease in
 * use (a claim records the longest one it has seen; see `lua/includes/lossGuard.lua`).
 */
export const DEFAULT_LEASE_MS = 15_000;

/**
 * Slack on top of that lease in the loss guard's wait after a loss, ms. Every session admitted before the
 * loss was stopped by its host within its lease of a renewal that the lost process answered, before it
 * was replaced; the slack covers the millisecond clock and the failover's own timing (a Cluster master
 * cut off stops taking writes about when its replica is promoted).
 */
export const LOSS_WAIT_SLACK_MS = 250;

/**
 * The loss guard's arguments, in this order, as every script that includes `lua/includes/lossGuard.lua`
 * takes them: right before its event channel, or last when it has none (see each script's header).
 */
export const lossGuardArgs: readonly [number, number] = [DEFAULT_LEASE_MS, LOSS_WAIT_SLACK_MS];
