// What a session receives of a proxied request: the request as sent, less what was the proxy's (the
// connect token, its cookie, an Authorization it consumed), with the forwarding headers set by the proxy
// alone (a client's own copies removed first).
import type { IncomingHttpHeaders } from 'node:http';

/** The cookie a connect token is exchanged for. */
export const PROXY_COOKIE = 'cq_proxy';
/** The query parameter a connect URL carries its token in. */
export const TOKEN_PARAM = 'cq_connect';
/** The header programs send the token in. */
export const TOKEN_HEADER = 'cq-connect-token';

/** Headers only the proxy sets: a client's copies never reach a session. */
const PROXY_ONLY = [
  TOKEN_HEADER,
  'cq-user-id',
  'cq-session-id',
  'x-forwarded-for',
  'x-forwarded-proto',
  'x-forwarded-host',
  'x-forwarded-port',
  'x-real-ip',
  'forwarded',
];

/**
 * Hop-by-hop headers (RFC 9110 §7.6.1) and `Expect`: they describe the client's connection to the API,
 * not a request the session should see; undici sets its own.
 */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'expect',
];

/** The value of cookie `name` in a Cookie header, or undefined. */
export function cookieValue(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq !== -1 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** A Cookie header without cookie `name`; undefined when nothing is left. */
export function withoutCookie(header: string | undefined, name: string): string | undefined {
  if (header === undefined) return undefined;
  const kept = header
    .split(';')
    .map((part) => part.trim())
    .filter(
      (part) =>
        part !== '' && part.slice(0, part.indexOf('=') === -1 ? part.length : part.indexOf('=')).trim() !== name,
    );
  return kept.length === 0 ? undefined : kept.join('; ');
}

/** A query string (without `?`) less the token parameter. */
export function withoutTokenParam(search: string): string {
  return search
    .split('&')
    .filter((pair) => pair !== '' && decodedName(pair.split('=')[0]!) !== TOKEN_PARAM)
    .join('&');
}

/** A query parameter's name as URLSearchParams reads it (`cq%5Fconnect` is `cq_connect`). */
function decodedName(raw: string): string {
  try {
    return decodeURIComponent(raw.replaceAll('+', ' '));
  } catch {
    return raw;
  }
}

export interface Forwarding {
  readonly clientIp: string;
  readonly proto: 'http' | 'https';
  readonly host: string;
  readonly userId: string;
  readonly sessionId: string;
  /** The request's Authorization was the proxy's (an API key): it is removed. */
  readonly consumedAuthorization: boolean;
}

/** The headers a session receives. */
export function sessionHeaders(
  headers: IncomingHttpHeaders,
  forwarding: Forwarding,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.includes(name)) continue;
    // A server that reads headers as CGI variables (CQ_USER_ID) takes cq_user_id for cq-user-id.
    if (PROXY_ONLY.includes(name.replaceAll('_', '-'))) continue;
    out[name] = value;
  }
  if (forwarding.consumedAuthorization) delete out['authorization'];
  const cookie = withoutCookie(headers.cookie, PROXY_COOKIE);
  if (cookie === undefined) delete out['cookie'];
  else out['cookie'] = cookie;
  out['host'] = forwarding.host;
  out['x-forwarded-for'] = forwarding.clientIp;
  out['x-forwarded-proto'] = forwarding.proto;
  out['x-forwarded-host'] = forwarding.host;
  out['cq-user-id'] = forwarding.userId;
  out['cq-session-id'] = forwarding.sessionId;
  return out;
}
