import { randomUUID } from 'node:crypto';
import type { Context } from '../context.js';
import { ScriptCode, replyCode, unexpectedReply } from '../errors.js';
import { Keepalive, type RenewAnswer } from './keepalive.js';
import { assertInteger } from '../validate.js';

/** Options of {@link LeaseManager.acquire}. */
export interface AcquireOptions {
  /** Lease time to live, in ms; renewals extend it by this much. */
  leaseMs: number;
  /** Hard cap on the lease's life from now, in ms: no renewal passes it. */
  maxLifetimeMs: number;
  /** Owner id. @defaultValue a random UUID */
  owner?: string;
}

/** A held lease. */
export interface Lease {
  readonly resource: string;
  readonly owner: string;
  /** Fencing token: strictly increases with each acquisition of this resource. */
  readonly fence: number;
  /** When the lease runs out unless renewed, epoch ms (Redis clock). */
  readonly expiresAt: number;
  /** The hard deadline, epoch ms (Redis clock). */
  readonly deadline: number;
  /** The lease time to live it was acquired with, in ms. */
  readonly leaseMs: number;
  /** The hard cap it was acquired with, in ms. */
  readonly maxLifetimeMs: number;
  /** `performance.now()` when the acquisition was sent: the local clock's conservative start of the lease. */
  readonly sentAt: number;
}

/** What {@link LeaseManager.renew} answers: when renewed, also the new expiry (epoch ms, Redis clock). */
export type LeaseRenewAnswer =
  (RenewAnswer & { readonly ok: true; readonly expiresAt: number }) | (RenewAnswer & { readonly ok: false });

/** What {@link LeaseManager.acquire} answers. */
export type AcquireOutcome =
  { readonly acquired: true; readonly lease: Lease } | { readonly acquired: false; readonly retryAfterMs: number };

/**
 * Leases (locks) in Redis: `SET NX PX` semantics with a fencing token issued in the same script,
 * renewal by the owner only, compare-and-delete release, and a hard deadline stored in Redis.
 */
export class LeaseManager {
  readonly #context: Context;

  constructor(context: Context) {
    this.#context = context;
  }

  /** Acquires the lease on `resource` unless someone holds it. One round trip. */
  async acquire(resource: string, options: AcquireOptions): Promise<AcquireOutcome> {
    assertInteger(options.leaseMs, 'leaseMs', 1);
    assertInteger(options.maxLifetimeMs, 'maxLifetimeMs', 1);
    const keys = this.#context.keys.lease(resource);
    const owner = options.owner ?? randomUUID();
    const sentAt = performance.now();
    const reply = await this.#context.scripts.run(
      'acquireLease',
      [keys.lease, keys.fence],
      [owner, options.leaseMs, options.maxLifetimeMs],
    );
    if (replyCode(reply) === ScriptCode.LeaseHeld) return { acquired: false, retryAfterMs: Number(reply[1]) };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('acquireLease', reply);
    return {
      acquired: true,
      lease: {
        resource,
        owner,
        fence: Number(reply[1]),
        expiresAt: Number(reply[2]),
        deadline: Number(reply[3]),
        leaseMs: options.leaseMs,
        maxLifetimeMs: options.maxLifetimeMs,
        sentAt,
      },
    };
  }

  /** Renews `lease` for another `leaseMs` (never past its deadline). One round trip. */
  async renew(lease: Lease, leaseMs: number = lease.leaseMs): Promise<LeaseRenewAnswer> {
    const reply = await this.#context.scripts.run(
      'renewLease',
      [this.#context.keys.lease(lease.resource).lease],
      [lease.owner, leaseMs],
    );
    if (replyCode(reply) === ScriptCode.LeaseLost) return { ok: false, reason: 'lease_lost' };
    if (replyCode(reply) === ScriptCode.DeadlineReached) return { ok: false, reason: 'deadline_reached' };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('renewLease', reply);
    const [, expiresAt, deadline, now] = reply.map(Number);
    return { ok: true, ttlMs: expiresAt! - now!, deadlineInMs: deadline! - now!, expiresAt: expiresAt! };
  }

  /** Releases `lease` if it is still this owner's (compare-and-delete). True when it was. One round trip. */
  async release(lease: Lease): Promise<boolean> {
    const reply = await this.#context.scripts.run(
      'releaseLease',
      [this.#context.keys.lease(lease.resource).lease],
      [lease.owner],
    );
    return replyCode(reply) === ScriptCode.Ok;
  }

  /**
   * Renews `lease` every `intervalMs` (a third of the lease by default) until stopped; the returned
   * keepalive's signal aborts as soon as the lease is lost.
   */
  keepalive(
    lease: Lease,
    options: { intervalMs?: number; onError?: (err: unknown) => void } = {},
  ): Keepalive<LeaseRenewAnswer> {
    const elapsed = performance.now() - lease.sentAt;
    return new Keepalive<LeaseRenewAnswer>({
      renew: () => this.renew(lease),
      intervalMs: options.intervalMs ?? Math.max(1, Math.floor(lease.leaseMs / 3)),
      ttlMs: Math.min(lease.leaseMs, lease.maxLifetimeMs) - elapsed,
      deadlineInMs: lease.maxLifetimeMs - elapsed,
      ...(options.onError === undefined ? {} : { onError: options.onError }),
    }).start();
  }
}
