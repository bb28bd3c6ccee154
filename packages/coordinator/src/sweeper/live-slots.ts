import { ChannelSubscriber } from '../events/channel-subscriber.js';
import { decodeMessage } from '../events/codec.js';
import type { Context } from '../context.js';
import { wrapRedisError } from '../redis-errors.js';
import { SLOT_COUNT } from '../slots.js';
import type { SlotReading } from './slot-reads.js';

/**
 * The slots that may hold live sessions, as the sweeper holding the turn knows them. It reads every slot
 * once when it takes the turn, after subscribing to the event channel, and from then on learns of every
 * new session from its `pending` event (every entry of a live index starts with one); a slot found empty
 * is forgotten until its next event. A lost subscription means messages may have been missed: what it
 * knows is incomplete ({@link LiveSlots.known} false) until the sweeper has subscribed again and read
 * every slot again. A few more slots are read each sweep, in turn ({@link LiveSlots.rolling}), as a net
 * under that.
 */
export class LiveSlots {
  readonly #context: Context;
  /** The subscription's connection name (CLIENT LIST). */
  readonly #name: string;
  /** Slots that may hold live sessions. */
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
  /** The event channel's subscription, while the sweeper holds the turn. */
  #subscriber: ChannelSubscriber | undefined;
  /** True while {@link LiveSlots.#live} is complete: every slot was read since the subscription opened. */
  #known = false;
  /** Bumped when the subscription is lost: a full read that began before proves nothing. */
  #epoch = 0;
  /** The next slot the rolling read takes. */
  #cursor = 0;

  constructor(context: Context, name: string) {
    this.#context = context;
    this.#name = name;
  }

  /** How many slots are tracked. */
  get size(): number {
    return this.#live.size;
  }

  /** True while the tracked slots are every slot that may hold a live session. */
  get known(): boolean {
    return this.#known;
  }

  /** The events seen per slot so far: taken before a read, and handed to {@link LiveSlots.learn} with it. */
  seen(): Uint32Array {
    return this.#seen.slice();
  }

  /** The next `count` slots of the rolling read (every slot in turn). */
  rolling(count: number): number[] {
    const slots = Array.from({ length: Math.min(count, SLOT_COUNT) }, (_, i) => (this.#cursor + i) % SLOT_COUNT);
    this.#cursor = (this.#cursor + slots.length) % SLOT_COUNT;
    return slots;
  }

  /**
   * The tracked slots to read at `now`: those whose first entry is due, and those with an event since
   * they were read. One whose first entry is not due yet, and that had no event since, is left alone:
   * each running session would otherwise cost one read per sweep.
   */
  due(now: number, seen: Uint32Array): number[] {
    return [...this.#live].filter((slot) => this.#firstDue[slot]! <= now || seen[slot] !== this.#seenAtRead[slot]);
  }

  /** Keeps the slots found live; forgets those found empty, unless an event of theirs came since they were read. */
  learn(reading: SlotReading, seenBefore: Uint32Array): void {
    reading.live.forEach((slot, i) => {
      this.#live.add(slot);
      this.#firstDue[slot] = reading.firsts[i]!;
      this.#seenAtRead[slot] = seenBefore[slot]!;
    });
    for (const slot of reading.empty) if (seenBefore[slot] === this.#seen[slot]) this.#live.delete(slot);
  }

  /** Opens the event subscription (a new one), answering the epoch it opened in. */
  async subscribe(): Promise<number> {
    this.#subscriber ??= new ChannelSubscriber(this.#context.redis, {
      channels: [this.#context.keys.eventChannel()],
      name: this.#name,
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

  /** After a read of every slot that began once the subscription of `epoch` was open: known, unless it was lost since. */
  readAll(epoch: number): void {
    if (epoch === this.#epoch) this.#known = true;
  }

  /** Forgets what it knew and drops its subscription. */
  forget(): void {
    this.#subscriber?.drop();
    this.#subscriber = undefined;
    this.#known = false;
    this.#live.clear();
  }
}
