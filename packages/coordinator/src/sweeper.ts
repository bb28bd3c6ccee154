import { randomUUID } from 'node:crypto';
import type { Context } from './context.js';
import { settleBounded } from './fan-out.js';
import type { SessionStore } from './sessions.js';
import type { WorkerRegistry } from './workers.js';
import { HostLeaseSweep } from './sweeper/host-leases.js';
import { ListUpgrade } from './sweeper/list-upgrade.js';
import { LiveSlots } from './sweeper/live-slots.js';
import { allSlots, readSlots, redisNow } from './sweeper/slot-reads.js';
import { SweepTurn } from './sweeper/turn.js';
import type { FullScan, SweepResult, SweeperOptions } from './sweeper/types.js';

export type { FullScan, SweepResult, SweeperOptions };

type Callbacks = 'onError' | 'onSwept' | 'onFullScan' | 'onRecounted';

/**
 * Ends as `lost` the pending sessions nobody claimed in time and the running sessions whose lease
 * expired, even when nobody asks about those users. It reads the live-session index (one sorted set per
 * cluster slot, scored by due time), never the keyspace, and re-checks each due user in one atomic
 * script, so any number of API processes may sweep at once.
 *
 * By default they take turns ({@link SweepTurn}), and the one holding the turn reads only the slots that
 * hold live sessions ({@link LiveSlots}: every slot once when it takes the turn, then those it learns of
 * from the event channel, and a few more in turn). So an idle deployment costs Redis a few commands per
 * sweep, not 16384, and API processes that do not hold the turn cost one command per turn's time to
 * live. Beside that, every `hostIntervalMs` the holder ends the sessions of host leases that ran out
 * ({@link HostLeaseSweep}); each full read enters the slots of sessions from before the session list in
 * its directory ({@link ListUpgrade}); and each sweep recounts the pools' capacity.
 */
export class Sweeper {
  readonly #context: Context;
  readonly #sessions: SessionStore;
  readonly #workers: WorkerRegistry;
  readonly #options: Required<Omit<SweeperOptions, Callbacks>> & Pick<SweeperOptions, Callbacks>;
  readonly #id = randomUUID();
  readonly #turn: SweepTurn;
  readonly #slots: LiveSlots;
  readonly #hosts: HostLeaseSweep;
  readonly #upgrade: ListUpgrade;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #hostTimer: NodeJS.Timeout | undefined;
  #hostRunning: Promise<unknown> | undefined;
  #sweeps = 0;
  #fullScans = 0;
  /** Set by {@link Sweeper.stop}: a sweep in progress starts no more scripts. */
  #stopping = false;

  constructor(context: Context, sessions: SessionStore, workers: WorkerRegistry, options: SweeperOptions = {}) {
    this.#context = context;
    this.#sessions = sessions;
    this.#workers = workers;
    this.#options = {
      intervalMs: 5000,
      batchSize: 2048,
      perSlot: 100,
      scanSlotsPerSweep: 128,
      takeTurns: true,
      concurrency: 256,
      ...options,
      hostIntervalMs: options.hostIntervalMs ?? 1000,
    };
    // This sweeper's own name: one sweeper's connection can be told from the others' (CLIENT LIST).
    this.#slots = new LiveSlots(context, `cq-sweep:${this.#id}`);
    this.#turn = new SweepTurn(context, this.#id, this.#options.intervalMs, () => this.#slots.forget());
    this.#hosts = new HostLeaseSweep(workers, sessions, {
      concurrency: this.#options.concurrency,
      stopping: () => this.#stopping,
      onSwept: this.#options.onSwept,
    });
    this.#upgrade = new ListUpgrade(context, this.#options.onError);
  }

  /** Finds the users due now in every slot's live index. */
  async dueUsers(): Promise<string[]> {
    return (await readSlots(this.#context, allSlots(), this.#options)).due;
  }

  /** One sweep over the whole index (without the turn: for a one-off sweep or a test). */
  async sweepOnce(): Promise<SweepResult> {
    const ofHosts = await this.sweepHosts();
    const result = await this.#end(await this.dueUsers());
    return { due: result.due + ofHosts, lost: result.lost + ofHosts };
  }

  /**
   * Ends, as `lost`, the sessions registered under host leases that ran out (their hosts stopped them
   * by then) that those hosts claimed, then forgets those leases. Answers how many sessions it ended.
   */
  sweepHosts(): Promise<number> {
    return this.#hosts.sweep();
  }

  /** This sweeper's id: the value of the turn key while it holds the turn. */
  get id(): string {
    return this.#id;
  }

  /** Sweeps this sweeper has made (turns it took). */
  get sweeps(): number {
    return this.#sweeps;
  }

  /** Sweeps that read every slot (taking the turn over, or after the event subscription was lost). */
  get fullScans(): number {
    return this.#fullScans;
  }

  /** Slots this sweeper currently reads each sweep because they may hold live sessions. */
  get trackedSlots(): number {
    return this.#slots.size;
  }

  /** Sweeps every `intervalMs` (while it holds the turn) until {@link Sweeper.stop}. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#stopping = false;
    const loop = (): void => {
      this.#running = this.#sweep()
        .catch((err: unknown) => {
          this.#options.onError?.(err);
          return this.#options.intervalMs;
        })
        .then((next) => {
          if (this.#timer !== undefined) this.#timer = setTimeout(loop, next);
        });
    };
    this.#timer = setTimeout(loop, this.#options.intervalMs);
    const hostLoop = (): void => {
      const mine = !this.#options.takeTurns || this.#turn.holding;
      this.#hostRunning = (mine ? this.sweepHosts() : Promise.resolve(0))
        .catch((err: unknown) => this.#options.onError?.(err))
        .then(() => {
          if (this.#hostTimer !== undefined) this.#hostTimer = setTimeout(hostLoop, this.#options.hostIntervalMs);
        });
    };
    this.#hostTimer = setTimeout(hostLoop, this.#options.hostIntervalMs);
  }

  /**
   * Stops sweeping: a sweep in progress starts no more scripts, and the ones it has started end before
   * this resolves. Then gives the turn up, so another sweeper takes it at once.
   */
  async stop(): Promise<void> {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    clearTimeout(this.#hostTimer);
    this.#hostTimer = undefined;
    this.#stopping = true;
    await Promise.all([this.#running, this.#hostRunning]);
    await this.#turn.giveUp().catch((err: unknown) => this.#options.onError?.(err));
    this.#slots.forget();
  }

  /** One turn: sweeps if this sweeper holds the turn (keeping it, or taking it); answers when to look again, ms. */
  async #sweep(): Promise<number> {
    const { intervalMs } = this.#options;
    if (this.#options.takeTurns && !(await this.#turn.hold())) return intervalMs;
    await this.#sweepTracked();
    // The pools' totals recounted from their hosts' shares: a drift (writes Redis replayed or dropped)
    // lasts a sweep interval at most.
    const corrected = await this.#workers.recountCapacity();
    if (corrected > 0) this.#options.onRecounted?.(corrected);
    this.#sweeps++;
    return intervalMs;
  }

  /**
   * Sweeps the slots known to hold live sessions (all of them when that is not known yet), and the
   * next few of the rolling read.
   */
  async #sweepTracked(): Promise<SweepResult> {
    const slots = this.#slots;
    if (!slots.known) {
      const epoch = await slots.subscribe();
      const seen = slots.seen();
      const startedAt = performance.now();
      const reading = await readSlots(this.#context, allSlots(), this.#options);
      this.#fullScans++;
      await this.#upgrade.check(reading.live);
      slots.learn(reading, seen);
      this.#options.onFullScan?.({
        ms: Math.round(performance.now() - startedAt),
        liveSlots: slots.size,
        count: this.#fullScans,
      });
      slots.readAll(epoch);
      return this.#end(reading.due);
    }
    await this.#upgrade.check();
    const rolling = slots.rolling(this.#options.scanSlotsPerSweep);
    const seen = slots.seen();
    const now = await redisNow(this.#context);
    const reading = await readSlots(
      this.#context,
      [...new Set([...slots.due(now, seen), ...rolling])],
      this.#options,
      now,
    );
    slots.learn(reading, seen);
    return this.#end(reading.due);
  }

  /**
   * Ends the due users as `lost`, `concurrency` scripts at a time, and none started once the sweeper is
   * stopping. Every script started is awaited, whatever the others do: a failure is thrown (as the
   * sweep's error) only once none of them runs any more.
   */
  async #end(due: readonly string[]): Promise<SweepResult> {
    const outcomes = await settleBounded(
      due,
      this.#options.concurrency,
      () => this.#stopping,
      (userId) => this.#sessions.sweepUser(userId),
    );
    const failed = outcomes.find((outcome) => outcome.status === 'rejected');
    const lost = outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value).length;
    const result = { due: due.length, lost };
    if (lost > 0) this.#options.onSwept?.(result);
    if (failed !== undefined) throw failed.reason;
    return result;
  }
}
