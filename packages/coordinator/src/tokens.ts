import { createHash, randomBytes } from 'node:crypto';
import type { Context } from './context.js';
import { InvalidArgumentError, ScriptCode, replyCode, unexpectedReply } from './errors.js';
import { parseRateReply, type RateLimitResult } from './limiters/rate-limit.js';
import { lossGuardArgs } from './liveness/constants.js';
import { MAX_METADATA_BYTES, MAX_TOKEN_TTL_MS, type Policy } from './options.js';
import { DEFAULT_POOL, formatToken, tokenParts } from '@cq/contract';
import { assertInteger, assertLabels, assertPool, assertUserId } from './validate.js';

/** Bytes of randomness in a token's secret (256 bits). */
export const TOKEN_SECRET_BYTES = 32;

/** Metadata carried by a token to the session it admits: a JSON object. */
export type Metadata = Record<string, unknown>;

/** A token string taken apart. */
export interface ParsedToken {
  readonly userId: string;
  /** SHA-256 of the secret part, hex: the only form in which Redis sees the token. */
  readonly digest: string;
}

/** SHA-256 of a token secret, hex. */
function digestOf(secret: string): string {
  return createHash('sha256').update(secret).digest('hex');
}

/**
 * Takes a token string apart without asking Redis; `undefined` for anything malformed, so a caller can
 * refuse it without a round trip.
 */
export function parseToken(token: unknown): ParsedToken | undefined {
  const parts = typeof token === 'string' ? tokenParts(token) : undefined;
  return parts === undefined ? undefined : { userId: parts.userId, digest: digestOf(parts.secret) };
}

/** Makes a new token string for a user, with 256 random bits from `crypto`. */
export function createToken(userId: string): { token: string; parsed: ParsedToken } {
  const secret = randomBytes(TOKEN_SECRET_BYTES).toString('base64url');
  const token = formatToken(userId, secret);
  return { token, parsed: { userId, digest: digestOf(secret) } };
}

/** Options of {@link TokenStore.issue}. */
export interface IssueOptions {
  /** Carried to the session as `SESSION_METADATA`; at most 4 KiB as JSON. @defaultValue `{}` */
  metadata?: Metadata;
  /** Life of the token. @defaultValue the policy's `tokenTtlMs` */
  ttlMs?: number;
  /** Lifetime of the session it admits; at most the policy's `maxLifetimeMs`. @defaultValue the cap */
  lifetimeMs?: number;
  /**
   * Idle timeout of the session it admits, ms: stopped (reason `idle`) after this long without activity;
   * 0: never. At most the policy's `maxLifetimeMs`. @defaultValue the policy's `idleTimeoutMs`
   */
  idleTimeoutMs?: number;
  /** Labels of the session it admits (at most 16; see `@cq/contract`'s label limits). @defaultValue `{}` */
  labels?: Readonly<Record<string, string>>;
  /** The pool whose hosts run the session it admits. @defaultValue `default` */
  pool?: string;
}

/** What {@link TokenStore.issue} answers. */
export type IssueOutcome =
  | {
      readonly outcome: 'issued';
      readonly token: string;
      readonly userId: string;
      readonly expiresAt: number;
      readonly rate: RateLimitResult;
    }
  | { readonly outcome: 'throttled'; readonly userId: string; readonly rate: RateLimitResult };

/** What {@link TokenStore.consume} answers. */
export type ConsumeOutcome =
  | {
      readonly consumed: true;
      readonly userId: string;
      readonly metadata: Metadata;
      readonly lifetimeMs?: number;
      readonly expiresAt: number;
    }
  | { readonly consumed: false };

/** Serialises metadata and checks its size; throws {@link InvalidArgumentError} when it is not acceptable. */
export function encodeMetadata(metadata: Metadata | undefined): string {
  if (metadata === undefined) return '{}';
  if (metadata === null || typeof metadata !== 'object' || Array.isArray(metadata)) {
    throw new InvalidArgumentError('metadata must be a JSON object');
  }
  const json = JSON.stringify(metadata);
  if (Buffer.byteLength(json) > MAX_METADATA_BYTES) {
    throw new InvalidArgumentError(`metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON`);
  }
  return json;
}

/** One-time spawn tokens: issued under a per-user rate limit, stored only as digests, consumed once. */
export class TokenStore {
  readonly #context: Context;
  readonly #policy: Policy;

  constructor(context: Context, policy: Policy) {
    this.#context = context;
    this.#policy = policy;
  }

  /** The Redis key of a parsed token. */
  keyOf(parsed: ParsedToken): string {
    return this.#context.keys.token(parsed.userId, parsed.digest);
  }

  /**
   * Issues a token for `userId` unless the user's token rate (the policy's `tokenLimit` per
   * `tokenWindowMs`, sliding window) is used up. One round trip.
   */
  async issue(userId: string, options: IssueOptions = {}): Promise<IssueOutcome> {
    assertUserId(userId);
    const ttlMs = options.ttlMs ?? this.#policy.tokenTtlMs;
    assertInteger(ttlMs, 'ttlMs', 1, MAX_TOKEN_TTL_MS);
    if (options.lifetimeMs !== undefined)
      assertInteger(options.lifetimeMs, 'lifetimeMs', 1, this.#policy.maxLifetimeMs);
    // The default is applied here, at issue: the token carries its session's whole idle rule to the admission.
    const idleTimeoutMs = options.idleTimeoutMs ?? this.#policy.idleTimeoutMs;
    assertInteger(idleTimeoutMs, 'idleTimeoutMs', 0, this.#policy.maxLifetimeMs);
    const metadata = encodeMetadata(options.metadata);
    const labels = options.labels ?? {};
    assertLabels(labels);
    const pool = options.pool ?? DEFAULT_POOL;
    assertPool(pool);
    const { token, parsed } = createToken(userId);
    const keys = this.#context.keys.user(userId);
    const reply = await this.#context.scripts.run(
      'issueToken',
      [this.keyOf(parsed), keys.tokenRate, keys.guard],
      [
        ttlMs,
        options.lifetimeMs ?? '',
        metadata,
        this.#policy.tokenLimit,
        this.#policy.tokenWindowMs,
        idleTimeoutMs,
        JSON.stringify(labels),
        pool,
        ...lossGuardArgs,
      ],
    );
    const rate = parseRateReply([replyCode(reply) === ScriptCode.Ok ? 1 : 0, ...reply.slice(2)], 'issueToken');
    if (replyCode(reply) === ScriptCode.Ok)
      return { outcome: 'issued', token, userId, expiresAt: Number(reply[1]), rate };
    if (replyCode(reply) === ScriptCode.Throttled) return { outcome: 'throttled', userId, rate };
    throw unexpectedReply('issueToken', reply);
  }

  /**
   * Consumes a token: exactly one of any number of simultaneous callers gets `consumed: true`.
   * Unknown, expired, used and malformed tokens all answer `consumed: false`; a malformed one costs no round trip.
   */
  async consume(token: string): Promise<ConsumeOutcome> {
    const parsed = parseToken(token);
    if (parsed === undefined) return { consumed: false };
    const reply = await this.#context.scripts.run('consumeToken', [this.keyOf(parsed)], []);
    if (replyCode(reply) === ScriptCode.TokenInvalid) return { consumed: false };
    if (replyCode(reply) !== ScriptCode.Ok) throw unexpectedReply('consumeToken', reply);
    const lifetime = String(reply[2]);
    return {
      consumed: true,
      userId: parsed.userId,
      metadata: JSON.parse(String(reply[1])) as Metadata,
      ...(lifetime === '' ? {} : { lifetimeMs: Number(lifetime) }),
      expiresAt: Number(reply[3]),
    };
  }
}
