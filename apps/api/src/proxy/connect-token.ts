// Connect tokens (the contract's session proxy): what `POST /v1/sessions/{id}/connect` hands out, and
// what a browser's cookie holds once the token is exchanged. A token names one session and one port and
// holds until `expiresAt`; it is signed (HMAC-SHA256) with a key derived from PROXY_SECRET, so every API
// process checks it on its own, without Redis: a flood of bad tokens costs no Redis call and locks out
// no one. A token dies with its session too: every request through it is refused once the session is
// not live (the proxy asks the session's host).
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface ConnectGrant {
  readonly sessionId: string;
  readonly port: number;
  /** Epoch ms. */
  readonly expiresAt: number;
}

/** The key connect tokens are signed with. */
export function connectTokenKey(secret: string): Buffer {
  return createHmac('sha256', secret).update('cq session proxy: connect token').digest();
}

const sign = (key: Buffer, body: string): string => createHmac('sha256', key).update(body).digest('base64url');

/** A token for `grant`: `cqc1.<session id>.<port>.<expires at>.<signature>` (URL- and cookie-safe). */
export function issueConnectToken(key: Buffer, grant: ConnectGrant): string {
  const body = `cqc1.${grant.sessionId}.${grant.port}.${grant.expiresAt}`;
  return `${body}.${sign(key, body)}`;
}

/** The grant of a well-formed, correctly signed, unexpired token; undefined otherwise. */
export function readConnectToken(key: Buffer, token: string, now: number = Date.now()): ConnectGrant | undefined {
  if (token.length > 200) return undefined;
  const match = /^cqc1\.([0-9a-f-]{36})\.(\d{1,5})\.(\d{1,15})\.([A-Za-z0-9_-]{43})$/.exec(token);
  if (match === null) return undefined;
  const expected = Buffer.from(sign(key, token.slice(0, token.length - match[4]!.length - 1)));
  const given = Buffer.from(match[4]!);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
  const grant = { sessionId: match[1]!, port: Number(match[2]), expiresAt: Number(match[3]) };
  if (grant.port < 1 || grant.port > 65_535 || grant.expiresAt <= now) return undefined;
  return grant;
}
