/**
 * Liveness, the coordinator's side: is this session still alive? A session may run only while Redis
 * would still refuse the next session of its user, and three layers in Redis say so, each renewed by the
 * host that runs the session and each the host's own instant for killing it (whichever runs out first).
 * The whole story, with what each fault takes away and the tests that prove it: `docs/liveness.md`; the
 * worker host's side: `apps/worker/src/liveness/`.
 *
 * ```text
 *   worker host                           coordinator (this folder)        Redis
 *   Keepalive, one per session  ──renew──▶ Claims.renew / keepalive  ──▶ 1. session lease  {u}:lease
 *   Heartbeat + HostLease       ──beat───▶ WorkerRegistry.publish    ──▶ 2. host lease     {workers}:host-leases
 *                               ──probe──▶ Claims.probe              ──▶ 3. loss guard     {u}:guard (run_id)
 *   SessionCover: min(2, 3) ──▶ Keepalive's cover: killBy = min(1, cover) − margin
 * ```
 *
 * 1. **The session lease** (`claims.ts`, `Claims`): the claim takes it (`claimSession`), the owner
 *    renews it (`renewSession`), learning of stops and moved deadlines, and `finish` releases it; it is
 *    what the fence and the one-session-per-user rule hang on. `keepalive.ts`'s `Keepalive` times the
 *    renewals and aborts its signal the margin before the lease, its hard deadline or its cover could run
 *    out. `lease.ts`'s `LeaseManager` is the same lease for any other resource (the webhook dispatcher's).
 * 2. **The host lease** (`host-leases.ts`, `HostLeases`): one per host process and token, taken and
 *    renewed by the host's heartbeat (`WorkerRegistry.publish`, one `heartbeatWorker` script with the
 *    host's record), which registers the host's sessions under it. A session held under it is renewed on
 *    its own only rarely (20 leases at a time): when the host lease runs out, the sweep
 *    (`sweeper/host-leases.ts`, `HostLeaseSweep`) ends its sessions as `lost`.
 * 3. **The Redis process** (the loss guard, `lua/includes/lossGuard.lua`): a host lease is only as good
 *    as the process keeping the session's records. A hosted renewal answers its `run_id`, and
 *    `Claims.probe` asks it of one slot per master (`Claims.masterOf`) with every periodic heartbeat; a
 *    process that changed may have lost writes, and the next renewal finds what it lost. The guard's
 *    wait after a loss (a lease, `DEFAULT_LEASE_MS` where no claim told the slot one, plus
 *    `LOSS_WAIT_SLACK_MS`) is named once, in `constants.ts`, and reaches every script that includes the
 *    guard as arguments (`lossGuardArgs`).
 *
 * How they relate: the worker's `SessionCover` holds 2 and 3 for one session (until when its host lease
 * holds, and when its Redis process was last heard from, each plus `LEASE_MS`) and hands that to the
 * session's `Keepalive` as its `cover`; the keepalive's `holdsUntil` (the earlier of its own lease and
 * the cover, less the margin) is the instant the session runtime kills at.
 */
export { Claims, MAX_ENDPOINT_LENGTH, type ClaimOptions, type SessionRenewAnswer } from './claims.js';
export { DEFAULT_LEASE_MS, LOSS_WAIT_SLACK_MS, lossGuardArgs } from './constants.js';
export { HostLeases, type HostLeaseAnswer, type HostLeaseBeat } from './host-leases.js';
export { Keepalive, LeaseLostError, type KeepaliveOptions, type RenewAnswer } from './keepalive.js';
export { LeaseManager, type AcquireOptions, type AcquireOutcome, type Lease, type LeaseRenewAnswer } from './lease.js';
