/** Options of `Sweeper` (`coordinator.sweeper(options)`). */
export interface SweeperOptions {
  /**
   * Milliseconds between sweeps. Admissions and stop requests end an overdue session of their own
   * user at once anyway; the sweep ends those nobody asks about.
   * @defaultValue 5000
   */
  intervalMs?: number;
  /**
   * Milliseconds between looks for host leases that ran out (their hosts' sessions are ended as `lost`
   * then, so their users can spawn again): one script per look, by the sweeper holding the turn.
   * @defaultValue 1000
   */
  hostIntervalMs?: number;
  /**
   * Index indexes read per pipelined batch.
   * @defaultValue 2048
   */
  batchSize?: number;
  /**
   * Due users taken from one slot's live index per sweep (the rest wait for the next sweep).
   * @defaultValue 100
   */
  perSlot?: number;
  /**
   * Slots read per sweep beyond those the sweeper knows hold live sessions, in turn, so that every
   * slot is read at least once per `16384 / scanSlotsPerSweep` sweeps (11 minutes at the defaults)
   * even if a message of the event channel was lost. Each costs one command per sweep.
   * @defaultValue 128
   */
  scanSlotsPerSweep?: number;
  /**
   * Take turns with the other sweepers of the deployment: one sweeper holds the turn and keeps it by
   * renewing it each sweep; the others try to take it once per interval (one `SET NX PX`), so the
   * deployment sweeps once per interval however many API processes run, and when the holder dies
   * another takes over within 2.5 intervals of its last sweep. false: sweep every interval regardless.
   * @defaultValue true
   */
  takeTurns?: boolean;
  /**
   * Due users ended at once (one `sweepSession` script each): after an outage a sweep may find
   * thousands due, and they are ended this many at a time rather than all at once as Redis comes back.
   * @defaultValue 256
   */
  concurrency?: number;
  /**
   * Called when a sweep fails (Redis unreachable), when the session list's upgrade could not check some
   * slots (they are checked again at the next sweep), or when the turn could not be given up at stop (it
   * runs out by itself); the sweeper goes on at the next interval.
   */
  onError?: (err: unknown) => void;
  /** Called after each sweep that ended sessions. */
  onSwept?: (result: SweepResult) => void;
  /** Called after each sweep that read every slot (the turn taken, or the event subscription lost). */
  onFullScan?: (scan: FullScan) => void;
  /**
   * Called when the capacity recount (with each sweep) corrected pools' totals that had drifted from
   * their hosts' shares: Redis replayed or dropped some writes.
   */
  onRecounted?: (corrected: number) => void;
}

/** A sweep that read every slot. */
export interface FullScan {
  /** How long reading the 16384 indexes took, ms. */
  readonly ms: number;
  /** Slots found holding live sessions. */
  readonly liveSlots: number;
  /** Full scans this sweeper has made, this one included. */
  readonly count: number;
}

/** What one sweep did. */
export interface SweepResult {
  /** Users found due in the index. */
  readonly due: number;
  /** Sessions ended as `lost`. */
  readonly lost: number;
}
