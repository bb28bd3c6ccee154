import { SLOT_COUNT, slotOf, slotTags } from './slots.js';
import { DEFAULT_POOL } from '@cq/contract';
import { assertName, assertPool, assertUserId } from './validate.js';

/** The keys of one user: all share the hash tag `{u:<userId>}`, so every script touches one slot. */
export interface UserKeys {
  /** Hash: the user's live (non-terminal) session. */
  readonly session: string;
  /** Hash {o, f, d}: the lease of the user's running session; expires unless renewed. */
  readonly lease: string;
  /** Integer: the user's fence counter; never expires, so fences strictly increase. */
  readonly fence: string;
  /** List of JSON: the user's ended sessions, newest first, capped. */
  readonly history: string;
  /** String: GCRA state of the user's spawn throttle. */
  readonly spawnThrottle: string;
  /** Sorted set: sliding-window log of the tokens issued to the user. */
  readonly tokenRate: string;
  /** Sorted set: the live-session index of the user's cluster slot. */
  readonly liveIndex: string;
  /** List of JSON: the recent endings of the user's slot (for the dashboard), capped. */
  readonly ended: string;
  /** Stream: the session events of the user's slot, kept for the event retention. */
  readonly events: string;
  /** Hash: the loss guard of the user's slot (lua/includes/lossGuard.lua). */
  readonly guard: string;
  /** Hash: session id → user id, for the sessions of the user's slot that are live or in their users' histories. */
  readonly ids: string;
  /** String: the generation of the slot's entry in the session list's directory; absent: not listed. */
  readonly listed: string;
  /**
   * The keys of every script that may end the user's session (`lua/includes/endSession.lua`), in the
   * order they take them: session, lease, history, live index, recent endings, events, session ids.
   */
  readonly ending: readonly string[];
}

/** The resource of the lease that makes one API process the webhook dispatcher (see {@link Keys.webhooks}). */
export const WEBHOOK_DISPATCH_LEASE = 'webhook-dispatch';

/**
 * Builds every Redis key of the coordinator; nothing else concatenates key strings.
 * Layout: `<prefix>:{u:<userId>}:<kind>` for a user's keys, `<prefix>:{<slotTag>}:live` for the
 * live-session index of a slot, `<prefix>:rl:<name>:{<id>}` for stand-alone limiters and
 * `<prefix>:lease:{r:<resource>}` for stand-alone leases.
 */
export class Keys {
  readonly prefix: string;

  constructor(prefix: string) {
    assertName(prefix, 'KEY_PREFIX');
    this.prefix = prefix;
  }

  /** The keys of one user. Throws when the user id is not valid. */
  user(userId: string): UserKeys {
    assertUserId(userId);
    const base = `${this.prefix}:{u:${userId}}`;
    const slot = slotOf(base);
    const keys = {
      session: `${base}:session`,
      lease: `${base}:lease`,
      fence: `${base}:fence`,
      history: `${base}:history`,
      spawnThrottle: `${base}:spawn`,
      tokenRate: `${base}:tokens`,
      liveIndex: this.liveIndex(slot),
      ended: this.ended(slot),
      events: this.events(slot),
      guard: this.guard(slot),
      ids: this.sessionIds(slot),
      listed: this.listed(slot),
    };
    return {
      ...keys,
      ending: [keys.session, keys.lease, keys.history, keys.liveIndex, keys.ended, keys.events, keys.ids],
    };
  }

  /** The key of one spawn token of a user, named by the SHA-256 digest (hex) of its secret. */
  token(userId: string, digestHex: string): string {
    assertUserId(userId);
    return `${this.prefix}:{u:${userId}}:token:${digestHex}`;
  }

  /**
   * The output of one session of a user: the stream of its kept lines, its record (bytes dropped), and
   * the channel (not a key) on which its followers are told of new lines.
   */
  output(userId: string, sessionId: string): { lines: string; record: string; channel: string } {
    assertUserId(userId);
    assertName(sessionId, 'sessionId');
    const base = `${this.prefix}:{u:${userId}}:out:${sessionId}`;
    return { lines: base, record: `${base}:rec`, channel: base };
  }

  /** The tombstone of one cancelled admission of a user. */
  cancelledAdmission(userId: string, sessionId: string): string {
    assertUserId(userId);
    assertName(sessionId, 'sessionId');
    return `${this.prefix}:{u:${userId}}:cancelled:${sessionId}`;
  }

  /**
   * The BullMQ prefix of spawn-queue shard `index` of `count`. Its hash tag is the slot in the middle
   * of the shard's share of the slot space, so every key of one queue sits in one slot (as BullMQ's
   * scripts need on Redis Cluster) and the shards spread over the masters like the users they serve.
   */
  queuePrefix(index: number, count: number): string {
    assertShard(index, count);
    const slot = Math.floor(((2 * index + 1) * SLOT_COUNT) / (2 * count));
    return `${this.prefix}:{${slotTags()[slot]!}}:q`;
  }

  /**
   * Which of `count` spawn-queue shards carries a user's jobs: the one whose share of the slot space
   * holds the user's slot, so with evenly split masters a user's job and keys live on one master.
   */
  queueShardOf(userId: string, count: number): number {
    assertUserId(userId);
    assertShard(0, count);
    return Math.floor((slotOf(`{u:${userId}}`) * count) / SLOT_COUNT);
  }

  /** The live-session index of one cluster slot. */
  liveIndex(slot: number): string {
    const tag = slotTags()[slot];
    if (tag === undefined) throw new RangeError(`slot ${slot} is outside 0..16383`);
    return `${this.prefix}:{${tag}}:live`;
  }

  /** The recent endings of one cluster slot. */
  ended(slot: number): string {
    const tag = slotTags()[slot];
    if (tag === undefined) throw new RangeError(`slot ${slot} is outside 0..16383`);
    return `${this.prefix}:{${tag}}:ended`;
  }

  /** The loss guard of one cluster slot (hash: see lua/includes/lossGuard.lua). */
  guard(slot: number): string {
    const tag = slotTags()[slot];
    if (tag === undefined) throw new RangeError(`slot ${slot} is outside 0..16383`);
    return `${this.prefix}:{${tag}}:guard`;
  }

  /** The session ids of one cluster slot (hash: session id → user id). */
  sessionIds(slot: number): string {
    return `${this.prefix}:{${this.#tag(slot)}}:ids`;
  }

  /** The `listed` key of one cluster slot: its entry in the session list's directory (see {@link Keys.directory}). */
  listed(slot: number): string {
    return `${this.prefix}:{${this.#tag(slot)}}:listed`;
  }

  /**
   * The session list's directory, on one slot of its own: the slots that may hold live sessions (sorted
   * set by slot number), each entry's generation (hash) and the generation counter
   * (lua/enterDirectory-3.lua).
   */
  directory(): { slots: string; generations: string; counter: string } {
    const base = `${this.prefix}:{sessions}:directory`;
    return { slots: base, generations: `${base}:generations`, counter: `${base}:counter` };
  }

  #tag(slot: number): string {
    const tag = slotTags()[slot];
    if (tag === undefined) throw new RangeError(`slot ${slot} is outside 0..16383`);
    return tag;
  }

  /** The session events of one cluster slot (stream). */
  events(slot: number): string {
    const tag = slotTags()[slot];
    if (tag === undefined) throw new RangeError(`slot ${slot} is outside 0..16383`);
    return `${this.prefix}:{${tag}}:events`;
  }

  /**
   * The channel of one worker host (a channel, not a key): the scripts that change what the host must act
   * on (a stop asked for, a lifetime moved) publish the user's id on it. They learn the host's id from
   * the session, so they are given {@link Keys.hostChannelPrefix} and add the id to it.
   */
  hostChannel(workerId: string): string {
    return `${this.hostChannelPrefix()}${workerId}`;
  }

  /** What every worker host's channel starts with: {@link Keys.hostChannel} less the host's id. */
  hostChannelPrefix(): string {
    return `${this.prefix}:host:`;
  }

  /** The channel every session event is published on (a channel, not a key: no hash tag). */
  eventChannel(): string {
    return `${this.prefix}:events`;
  }

  /** Every live-session index, one per cluster slot. */
  allLiveIndexes(): string[] {
    return slotTags().map((tag) => `${this.prefix}:{${tag}}:live`);
  }

  /** Per-minute counters of API outcomes (hash), for the dashboard's chart. */
  stats(minute: number): string {
    return `${this.prefix}:{stats}:minute:${minute}`;
  }

  /** The `SPAWN_QUEUE_SHARDS` the API runs with (string), so worker hosts can check they agree. */
  queueShards(): string {
    return `${this.prefix}:{workers}:queue-shards`;
  }

  /** The registry of worker hosts (sorted set: host id by when its heartbeat runs out, epoch ms). */
  workers(): string {
    return `${this.prefix}:{workers}:index`;
  }

  /** The worker capacity (hash: `total` slots of live hosts, `c:<workerId>` each host's share). */
  capacity(): string {
    return `${this.prefix}:{workers}:capacity`;
  }

  /**
   * A pool's held slots (sorted set: id of an admitted, unended session by when its hold runs out, epoch
   * ms). The pool `default` keeps the name it had before pools, so a deployment upgrades with its holds.
   */
  held(pool: string = DEFAULT_POOL): string {
    assertPool(pool);
    return pool === DEFAULT_POOL ? `${this.prefix}:{workers}:held` : `${this.prefix}:{workers}:held:${pool}`;
  }

  /** Worker hosts' leases (sorted set: a lease token by when the lease runs out, epoch ms). */
  hostLeases(): string {
    return `${this.prefix}:{workers}:host-leases`;
  }

  /** The sessions registered under one host lease (hash: session id → user id). */
  hostSessions(token: string): string {
    return `${this.prefix}:{workers}:host-sessions:${token}`;
  }

  /**
   * A worker host's nudges (set of user ids whose session changed): posted beside the message on the
   * host's channel, taken by the host's next heartbeat, so that a message lost on the channel still
   * arrives within a heartbeat.
   */
  hostNudges(workerId: string): string {
    assertName(workerId, 'WORKER_ID');
    return `${this.prefix}:{workers}:host-nudges:${workerId}`;
  }

  /** The loss guard of the {workers} slot (hash: see lua/includes/lossGuard.lua). */
  workersGuard(): string {
    return `${this.prefix}:{workers}:guard`;
  }

  /** The heartbeat record of one worker host (same slot as the registry). */
  worker(workerId: string): string {
    assertName(workerId, 'WORKER_ID');
    return `${this.prefix}:{workers}:host:${workerId}`;
  }

  /**
   * The webhooks' keys: on the `{webhooks}` slot the endpoints (hash: id → JSON), a version bumped on
   * each change and the BullMQ prefix of the delivery queue; on the dispatch lease's slot
   * (`{r:webhook-dispatch}`) the dispatch cursor (the id of the last event handed to the delivery queue),
   * so the script that moves it can check the lease's fence in the same slot.
   */
  webhooks(): { endpoints: string; version: string; cursor: string; queuePrefix: string } {
    const base = `${this.prefix}:{webhooks}`;
    return {
      endpoints: `${base}:endpoints`,
      version: `${base}:version`,
      cursor: `${this.lease(WEBHOOK_DISPATCH_LEASE).lease}:cursor`,
      queuePrefix: `${base}:q`,
    };
  }

  /** The delivery log of one webhook (list of JSON, newest first, capped). */
  webhookLog(webhookId: string): string {
    assertName(webhookId, 'webhook id');
    return `${this.prefix}:{webhooks}:log:${webhookId}`;
  }

  /** Whose turn it is to sweep (string: the sweeper's id, expiring after one interval). */
  sweepTurn(): string {
    return `${this.prefix}:{sweep}:turn`;
  }

  /** The key of a stand-alone rate limiter `name` for the caller `id`. */
  limiter(name: string, id: string): string {
    assertName(name, 'limiter name');
    assertName(id, 'limiter id');
    return `${this.prefix}:rl:${name}:{${id}}`;
  }

  /** The key of a stand-alone lease on `resource`, and of its fence counter. */
  lease(resource: string): { lease: string; fence: string } {
    assertName(resource, 'lease resource');
    const base = `${this.prefix}:lease:{r:${resource}}`;
    return { lease: base, fence: `${base}:fence` };
  }
}

function assertShard(index: number, count: number): void {
  if (!Number.isInteger(count) || count < 1 || count > SLOT_COUNT)
    throw new RangeError(`shard count must be an integer from 1 to ${SLOT_COUNT} (got ${count})`);
  if (!Number.isInteger(index) || index < 0 || index >= count)
    throw new RangeError(`shard index must be an integer from 0 to ${count - 1} (got ${index})`);
}
