// The product's words and limits, as the contract names them (docs/CONTRACT: Sessions, HTTP API). The
// coordinator imports them from here, so the API's schemas and Redis's records cannot drift apart, and
// the contract depends on nothing of the server side.

/** Every state of a session. */
export const sessionStates = [
  'pending',
  'running',
  'stopping',
  'completed',
  'failed',
  'expired',
  'stopped',
  'lost',
] as const;
/** The states a session ends in. */
export const terminalStates = ['completed', 'failed', 'expired', 'stopped', 'lost'] as const;

/**
 * The reasons a worker host may give when it records a session's end, each with the one state it goes
 * with (the coordinator's `endReasonStates`): `out_of_memory`, `failed` because its memory cap killed it;
 * `idle`, `stopped` because it showed no activity for its idle timeout.
 */
export const endReasons = ['out_of_memory', 'idle'] as const;
/** Every reason a terminal record (history entry, recent ending, terminal event) can carry. */
export const terminalReasons = ['host_lost', 'not_claimed', 'state_lost', ...endReasons] as const;

/**
 * How a worker host keeps every process of a session inside it (`SESSION_CONTAINMENT`, as the host
 * resolved it; `GET /v1/hosts`): `namespace`, a PID namespace per session; `group`, its process group only.
 */
export const containments = ['namespace', 'group'] as const;

/**
 * What a session reaches on the network (`SESSION_NETWORK`, as the host resolved it; `GET /v1/hosts`):
 * `none`, a network namespace of its own with only loopback; `egress`, that plus outbound connections
 * to public addresses; `host`, the host's network.
 */
export const sessionNetworks = ['none', 'egress', 'host'] as const;

/**
 * What a session sees of the host's files (`GET /v1/hosts`): `private`, its own `/tmp`, `/dev/shm` and
 * `SESSION_DIR`, the rest read-only; `shared`, the host's filesystem as its user may use it.
 */
export const sessionFilesystems = ['private', 'shared'] as const;

/** What a user id may be: 1 to 128 characters of `A-Z a-z 0-9 . _ : @ -`. */
export const USER_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

// A spawn token: v1.<base64url(userId)>.<base64url of a 32-byte secret>. The user id is its routing tag,
// so a consume is a one-slot script.
const TOKEN_PATTERN = /^v1\.([A-Za-z0-9_-]{2,172})\.([A-Za-z0-9_-]{43})$/;

/**
 * A spawn token taken apart without asking Redis: its user id and secret, or undefined for what cannot
 * be a token (the shape, a user id it could name, in its one base64url form). The coordinator refuses
 * such a string without a round trip; the CLI, before any call.
 */
export function tokenParts(token: string): { readonly userId: string; readonly secret: string } | undefined {
  const match = TOKEN_PATTERN.exec(token);
  if (match === null) return undefined;
  const tag = match[1]!;
  let userId: string;
  try {
    const bytes = Uint8Array.from(atob(tag.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
    userId = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    return undefined;
  }
  return USER_ID_PATTERN.test(userId) && base64url(userId) === tag ? { userId, secret: match[2]! } : undefined;
}

/** The token string for `userId` with `secret` (base64url): what {@link tokenParts} takes apart. */
export function formatToken(userId: string, secret: string): string {
  return `v1.${base64url(userId)}.${secret}`;
}

/** `text`'s UTF-8 bytes in base64url without padding (the token's user id tag). */
function base64url(text: string): string {
  const binary = Array.from(new TextEncoder().encode(text), (b) => String.fromCharCode(b)).join('');
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** What a worker host's `WORKER_ID` may be: 1 to 128 characters of `A-Z a-z 0-9 . _ : @ -`. */
export const WORKER_ID_PATTERN = /^[A-Za-z0-9._:@-]{1,128}$/;

/** What a webhook id is: `wh_` and 24 lowercase hex digits (12 random bytes), as the coordinator makes them. */
export const WEBHOOK_ID_PATTERN = /^wh_[0-9a-f]{24}$/;

/** Longest token life accepted: 30 days. */
export const MAX_TOKEN_TTL_MS = 30 * 24 * 3_600_000;

/** Largest metadata accepted with a token, in bytes of JSON. */
export const MAX_METADATA_BYTES = 4096;

/** Most labels a session may have. */
export const MAX_LABELS = 16;

/** What a label key may be: 1 to 63 characters of `A-Z a-z 0-9 . _ - /`. */
export const LABEL_KEY_PATTERN = /^[A-Za-z0-9._/-]{1,63}$/;

/** Longest label value, in characters; a value has no control characters. */
export const MAX_LABEL_VALUE_LENGTH = 128;

/** What a pool name may be: 1 to 64 of `a-z 0-9 -`. */
export const POOL_PATTERN = /^[a-z0-9-]{1,64}$/;

/** The pool of a token that names none, and of every session made before pools. */
export const DEFAULT_POOL = 'default';

/** The filters of `GET /v1/sessions` on a session's state: its live states. */
export const liveStates = ['pending', 'running', 'stopping'] as const;
