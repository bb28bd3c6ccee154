import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/**
 * Standard Webhooks signing (https://www.standardwebhooks.com/, "Signature scheme"): HMAC-SHA256 over
 * `<id>.<timestamp>.<body>` with the secret's bytes as key, sent as `webhook-signature: v1,<base64>`.
 * A few lines of `node:crypto`; the reference implementation (`standardwebhooks`) only checks it in tests.
 */

/** The prefix of every secret we issue, as the specification and Svix write it. */
export const WEBHOOK_SECRET_PREFIX = 'whsec_';

/** Bytes of randomness in a new secret (the specification asks for 24 to 64). */
const SECRET_BYTES = 32;

/** How far a receiver lets `webhook-timestamp` stray from its clock, in seconds (the reference library's 5 minutes). */
const DEFAULT_TOLERANCE_SECONDS = 300;

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** What one signature covers. */
export interface SignInput {
  /** `whsec_<base64>` (the prefix is optional, as in the reference implementation). */
  secret: string;
  /** The `webhook-id`: the event's id, the same for every attempt. */
  id: string;
  /** The `webhook-timestamp`: epoch seconds of this attempt, a whole number. */
  timestamp: number;
  /** The exact bytes sent as the request body (a string is taken as UTF-8). */
  body: Buffer | string;
}

/** What a receiver got, to be checked against the secret it holds. */
export interface VerifyInput {
  /** `whsec_<base64>`. */
  secret: string;
  /** The `webhook-id` header. */
  id: string;
  /** The `webhook-timestamp` header (epoch seconds), as sent or already parsed. */
  timestamp: number | string;
  /** The raw request body, byte for byte. */
  body: Buffer | string;
  /** The `webhook-signature` header: one or more space-separated `v<n>,<base64>` entries. */
  signature: string;
  /**
   * Largest accepted distance between `timestamp` and `nowSeconds`, in seconds (replay protection).
   * @defaultValue 300
   */
  toleranceSeconds?: number;
  /**
   * The receiver's clock, in epoch seconds.
   * @defaultValue `Date.now() / 1000`
   */
  nowSeconds?: number;
}

/** A new endpoint secret: `whsec_` and the base64 of 32 random bytes. Shown once, at creation. */
export function webhookSecret(): string {
  return WEBHOOK_SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/**
 * The HMAC key a secret stands for: the base64-decoded part after `whsec_`.
 * @throws TypeError when the secret is not `whsec_<base64>` of at least one byte.
 */
export function secretKey(secret: string): Buffer {
  const encoded = secret.startsWith(WEBHOOK_SECRET_PREFIX) ? secret.slice(WEBHOOK_SECRET_PREFIX.length) : secret;
  // Buffer.from(…, 'base64') skips characters it does not know; a typo must not silently become another key.
  if (!BASE64.test(encoded)) {
    throw new TypeError('webhook secret is not whsec_<base64>: check that it was copied whole');
  }
  return Buffer.from(encoded, 'base64');
}

/**
 * The `webhook-signature` value for one attempt: `v1,<base64 of HMAC-SHA256(key, "<id>.<timestamp>.<body>")>`.
 * The body is signed as bytes, so what is signed is exactly what is sent.
 * @throws TypeError for a malformed secret, RangeError for a timestamp that is not whole epoch seconds.
 */
export function sign({ secret, id, timestamp, body }: SignInput): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new RangeError(`webhook timestamp must be whole epoch seconds, got ${timestamp}`);
  }
  const mac = createHmac('sha256', secretKey(secret));
  mac.update(`${id}.${timestamp}.`, 'utf8');
  mac.update(typeof body === 'string' ? Buffer.from(body, 'utf8') : body);
  return `v1,${mac.digest('base64')}`;
}

/**
 * The three Standard Webhooks headers of one attempt, ready to send.
 * @param input - as for {@link sign}.
 */
export function signedHeaders(
  input: SignInput,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  return {
    'webhook-id': input.id,
    'webhook-timestamp': String(input.timestamp),
    'webhook-signature': sign(input),
  };
}

/**
 * Whether a delivery is authentic and fresh, as a receiver checks it: the timestamp lies within the
 * tolerance of the receiver's clock, and one of the `v1` entries of the signature header matches
 * (compared in constant time). Entries of other versions are ignored, as the specification asks.
 * @throws TypeError for a malformed secret (a receiver's configuration error, not a forged request).
 */
export function verify(input: VerifyInput): boolean {
  const { secret, id, body, signature } = input;
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_SECONDS;
  const now = input.nowSeconds ?? Date.now() / 1000;
  const timestamp = typeof input.timestamp === 'number' ? input.timestamp : Number(input.timestamp);
  if (typeof input.timestamp === 'string' && !/^\d+$/.test(input.timestamp)) return false;
  if (!Number.isSafeInteger(timestamp) || Math.abs(now - timestamp) > tolerance) return false;

  const expected = Buffer.from(sign({ secret, id, timestamp, body }).slice('v1,'.length), 'base64');
  for (const entry of signature.split(' ')) {
    const comma = entry.indexOf(',');
    if (comma < 0 || entry.slice(0, comma) !== 'v1') continue;
    const encoded = entry.slice(comma + 1);
    if (!BASE64.test(encoded)) continue;
    const candidate = Buffer.from(encoded, 'base64');
    if (candidate.length === expected.length && timingSafeEqual(candidate, expected)) return true;
  }
  return false;
}
