import { randomUUID } from 'node:crypto';
import type { Context } from './context.js';
import { ScriptCode, replyCode } from './errors.js';
import { ChannelSubscriber } from './events/channel-subscriber.js';
import { decodeMessage } from './events/codec.js';
import { fanOut, settleBounded, type Command } from './fan-out.js';
import { enterUnlisted } from './session-list.js';
import type { SessionStore } from './sessions.js';
import { wrapRedisError } from './redis-errors.js';
import { SLOT_COUNT } from './slots.js';
import { WorkerRegistry } from './workers.js';

/**
 * The id of the host whose lease `token` is: a host lease's token is `<workerId>/<unique>` (see
 * `HostLeaseBeat.token`), and a host id has no '/'. Undefined for a token of another shape: its
 * sessions are then swept without the host check.
 */
function hostOfLeaseToken(token: string): string | undefined {
  const at = token.indexOf('/');
  return at > 0 ? token.slice(0, at) : undefined;
}

/** Options of {@link Sweeper}. */
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
  /** Called when a sweep fails (Redis unreachable); the sweeper goes on at the next interval. */
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

/** What reading some slots' live indexes found. */
interface SlotReading {
  readonly due: string[];
  /** Slots whose index was empty when read. */
  readonly empty: number[];
  /** Slots whose index held a session. */
  readonly live: number[];
  /** The first (smallest) due time of each slot of `live`, epoch ms, in the same order. */
  readonly firsts: number[];
}

/**
 * Ends as `lost` the pending sessions nobody claimed in time and the running sessions whose lease
 * expired, even when nobody asks about those users. It reads the live-session index (one sorted set per
 * cluster slot, scored by due time), never the keyspace, and re-checks each due user in one atomic
 * script, so any number of API processes may sweep at once.
 *
 * By default they take turns, and the one holding the turn reads only the slots that hold live
 * sessions: it reads all 16384 slots once when it takes the turn, after subscribing to the event
 * channel, and from then on learns of every new session from its `pending` event (every entry of a
 * live index starts with one); a slot found empty is forgotten until its next event. A lost
 * subscription means messages may have been missed: the sweeper subscribes again and reads every slot
 * again. A few more slots are read each sweep, in turn, as a net under that. So an idle deployment
 * costs Redis a few commands per sweep, not 16384, and API processes that do not hold the turn cost
 * one command per turn's time to live.
 */
export class Sweeper {
  readonly #context: Context;
  readonly #sessions: SessionStore;
  readonly #options: Required<Omit<SweeperOptions, 'onError' | 'onSwept' | 'onFullScan' | 'onRecounted'>> &
    Pick<SweeperOptions, 'onError' | 'onSwept' | 'onFullScan' | 'onRecounted'>;
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  #hostTimer: NodeJS.Timeout | undefined;
  #hostRunning: Promise<unknown> | undefined;
  #registry: WorkerRegistry | undefined;
  #sweeps = 0;
  #fullScans = 0;
  readonly #id = randomUUID();
  /** Slots that may hold live sessions, as this sweeper knows them while it holds the turn. */
  readonly #live = new Set<number>();
  /** Events seen per slot: a slot read empty is forgotten only when no event of it came meanwhile. */
  readonly #seen = new Uint32Array(SLOT_COUNT);
  /**
   * Per slot, the smallest due time its live index held when last read (epoch ms, Redis's clock), and
   * the slot's event count then: a tracked slot is not read again before that time unless an event of
   * it came since (a new entry comes with its event; renewals only push due times later).
   */
  readonly #firstDue = new Float64Array(SLOT_COUNT);
  readonly #seenAtRead = new Uint32Array(SLOT_COUNT);
  /** True while this sweeper holds the turn (as far as it knows: its renewal says for sure). */
  #holding = false;
  /** The event channel, while this sweeper holds the turn. */
  #subscriber: ChannelSubscriber | undefined;
  /** True while {@link Sweeper.#live} is complete: every slot was read since the subscription opened. */
  #known = false;
  /** Bumped when the subscription is lost: a full read that began before proves nothing. */
  #epoch = 0;
  /** The next slot the rolling read takes. */
  #cursor = 0;
  /** Set by {@link Sweeper.stop}: a sweep in progress starts no more scripts. */
  #stopping = false;

  constructor(context: Context, sessions: SessionStore, options: SweeperOptions = {}) {
    this.#context = context;
    this.#sessions = sessions;
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
  }

  /** Finds the users due now in every slot's live index. */
  async dueUsers(): Promise<string[]> {
    return (await this.#read(allSlots())).due;
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
  async sweepHosts(): Promise<number> {
    const registry = (this.#registry ??= new WorkerRegistry(this.#context));
    let lost = 0;
    for (const token of await registry.expiredLeases()) {
      if (this.#stopping) break;
      const registered = Object.entries(await registry.leaseSessions(token));
      // Only the lease's own host's sessions: one claimed by another host (a session id claimed twice,
      // or a registration of something the host never ran) is that host's to end.
      const workerId = hostOfLeaseToken(token);
      const outcomes = await settleBounded(
        registered,
        this.#options.concurrency,
        () => this.#stopping,
        ([sessionId, userId]) => this.#sessions.sweepUser(userId, { sessionId, workerId }),
      );
      const failed = outcomes.find((outcome) => outcome.status === 'rejected');
      if (failed !== undefined) throw failed.reason;
      const ended = outcomes.filter((outcome) => outcome.status === 'fulfilled' && outcome.value).length;
      lost += ended;
      if (ended > 0) this.#options.onSwept?.({ due: registered.length, lost: ended });
      if (outcomes.length === registered.length) await registry.forgetLease(token);
    }
    return lost;
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
    return this.#live.size;
  }

  /** Sweeps every `intervalMs` (while it holds the turn) until {@link Sweeper.stop}. */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#stopping = false;
    const loop = (): void => {
      this.#running = this.#turn()
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
      const mine = !this.#options.takeTurns || this.#holding;
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
    // The holder gives the turn up (expires it in 1 ms), so another process takes it at its next try.
    if (this.#holding)
      await this.#context.scripts
        .run('renewSweepTurn', [this.#context.keys.sweepTurn()], [this.#id, 1])
        .catch(() => undefined);
    this.#resign();
  }

  /** One turn: sweeps if this sweeper holds the turn (keeping it, or taking it); answers when to look again, ms. */
  async #turn(): Promise<number> {
    const { intervalMs } = this.#options;
    if (this.#options.takeTurns && !(await this.#holdTurn())) return intervalMs;
    await this.#sweepTracked();
    // The pools' totals recounted from their hosts' shares: a drift (writes Redis replayed or dropped)
    // lasts a sweep interval at most.
    const corrected = await (this.#registry ??= new WorkerRegistry(this.#context)).recountCapacity();
    if (corrected > 0) this.#options.onRecounted?.(corrected);
    this.#sweeps++;
    return intervalMs;
  }

  /**
   * True when this sweeper holds the turn: it renews the turn it holds (`lua/renewSweepTurn-1.lua`),
   * or takes it with `SET NX PX` once nobody holds it (one command per interval while another does).
   * The turn lasts 1.5 intervals (at least one more second), so a holder late by less than that keeps
   * it, and one that died is replaced at most 2.5 intervals after its last sweep.
   */
  async #holdTurn(): Promise<boolean> {
    const { scripts, keys, redis } = this.#context;
    const { intervalMs } = this.#options;
    const ttlMs = Math.max(intervalMs + 1000, Math.ceil(intervalMs * 1.5));
    if (this.#holding) {
      const reply = await scripts.run('renewSweepTurn', [keys.sweepTurn()], [this.#id, ttlMs]);
      if (replyCode(reply) === ScriptCode.Ok) return true;
      this.#resign(); // lost it (this process stalled past its turn): what it knew may be stale
    }
    let taken: string | null;
    try {
      taken = await redis.set(keys.sweepTurn(), this.#id, 'PX', ttlMs, 'NX');
    } catch (err) {
      throw wrapRedisError(err);
    }
    if (taken !== 'OK') return false;
    this.#holding = true;
    return true;
  }

  /**
   * Sweeps the slots known to hold live sessions (all of them when that is not known yet), and the
   * next few of the rolling read.
   */
  async #sweepTracked(): Promise<SweepResult> {
    if (!this.#known) {
      const epoch = await this.#subscribe();
      const seen = this.#seen.slice();
      const startedAt = performance.now();
      const reading = await this.#read(allSlots());
      this.#fullScans++;
      // Slots of sessions from before the session list (an upgrade) enter its directory here; a miss is
      // tried again at the next full read.
      await enterUnlisted(this.#context, [...reading.live]).catch(() => 0);
      this.#learn(reading, seen);
      this.#options.onFullScan?.({
        ms: Math.round(performance.now() - startedAt),
        liveSlots: this.#live.size,
        count: this.#fullScans,
      });
      if (epoch === this.#epoch) this.#known = true;
      return this.#end(reading.due);
    }
    const rolling = Array.from(
      { length: Math.min(this.#options.scanSlotsPerSweep, SLOT_COUNT) },
      (_, i) => (this.#cursor + i) % SLOT_COUNT,
    );
    this.#cursor = (this.#cursor + rolling.length) % SLOT_COUNT;
    const seen = this.#seen.slice();
    // A tracked slot whose first entry is not due yet, and that had no event since it was read, is left
    // alone: each running session would otherwise cost one read per sweep.
    const now = await this.#redisNow();
    const due = [...this.#live].filter((slot) => this.#firstDue[slot]! <= now || seen[slot] !== this.#seenAtRead[slot]);
    const slots = [...new Set([...due, ...rolling])];
    const reading = await this.#read(slots, now);
    this.#learn(reading, seen);
    return this.#end(reading.due);
  }

  /** Keeps the slots found live; forgets those found empty, unless an event of theirs came since they were read. */
  #learn(reading: SlotReading, seenBefore: Uint32Array): void {
    reading.live.forEach((slot, i) => {
      this.#live.add(slot);
      this.#firstDue[slot] = reading.firsts[i]!;
      this.#seenAtRead[slot] = seenBefore[slot]!;
    });
    for (const slot of reading.empty) if (seenBefore[slot] === this.#seen[slot]) this.#live.delete(slot);
  }

  /** Opens the event subscription (a new one), answering the epoch it opened in. */
  async #subscribe(): Promise<number> {
    this.#subscriber ??= new ChannelSubscriber(this.#context.redis, {
      channels: [this.#context.keys.eventChannel()],
      // This sweeper's own name: one sweeper's connection can be told from the others' (CLIENT LIST).
      name: `cq-sweep:${this.#id}`,
      onMessage: (_channel, message) => {
        const event = decodeMessage(message);
        if (event === undefined) return;
        const slot = event.position.slot;
        this.#seen[slot] = this.#seen[slot]! + 1;
        this.#live.add(slot);
      },
      onLost: () => {
        this.#epoch++;
        this.#known = false;
      },
      onError: () => {}, // a lost connection is reported by onLost; the next sweep opens another
    });
    // Every message from now on is seen: those a lost subscription missed are found by the full read.
    this.#epoch++;
    const epoch = this.#epoch;
    try {
      await this.#subscriber.open();
    } catch (err) {
      throw wrapRedisError(err);
    }
    return epoch;
  }

  /** Forgets the turn, what it knew and its subscription. */
  #resign(): void {
    this.#holding = false;
    this.#subscriber?.drop();
    this.#subscriber = undefined;
    this.#known = false;
    this.#live.clear();
  }

  /** Redis's clock, epoch ms. */
  async #redisNow(): Promise<number> {
    try {
      const [seconds, micros] = await this.#context.redis.time();
      return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
    } catch (err) {
      throw wrapRedisError(err);
    }
  }

  /**
   * Reads the given slots' live indexes: the first entry of each, then the due users of those with any
   * due at `now` (Redis's clock, read here when not given).
   */
  async #read(slots: readonly number[], at?: number): Promise<SlotReading> {
    const { redis, keys } = this.#context;
    const { batchSize, perSlot } = this.#options;
    const due: string[] = [];
    const empty: number[] = [];
    const live: number[] = [];
    const firsts: number[] = [];
    const now = at ?? (await this.#redisNow());
    try {
      for (let i = 0; i < slots.length; i += batchSize) {
        const batch = slots.slice(i, i + batchSize);
        const heads = await fanOut(
          redis,
          batch.map((slot): Command => ['zrange', keys.liveIndex(slot), 0, 0, 'WITHSCORES']),
        );
        const dueSlots: number[] = [];
        heads.forEach((reply, j) => {
          const [, score] = reply as string[];
          if (score === undefined) return empty.push(batch[j]!);
          live.push(batch[j]!);
          firsts.push(Number(score));
          if (Number(score) <= now) dueSlots.push(batch[j]!);
        });
        if (dueSlots.length === 0) continue;
        const replies = await fanOut(
          redis,
          dueSlots.map((slot): Command => ['zrangebyscore', keys.liveIndex(slot), '-inf', now, 'LIMIT', 0, perSlot]),
        );
        for (const users of replies) due.push(...(users as string[]));
      }
    } catch (err) {
      throw wrapRedisError(err);
    }
    return { due, empty, live, firsts };
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

let every: number[] | undefined;

/** Every cluster slot, 0 to 16383. */
function allSlots(): readonly number[] {
  return (every ??= Array.from({ length: SLOT_COUNT }, (_, i) => i));
}
