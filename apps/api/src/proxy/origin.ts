// A session's own origin: `<port>-<sessionId>.<PROXY_DOMAIN>`, picked by the request's Host header.

/** The session and port a Host header names on `domain`, or undefined when it names none. */
export function sessionOrigin(
  host: string | undefined,
  domain: string,
): { sessionId: string; port: number } | undefined {
  if (host === undefined || host.length > 300) return undefined;
  const lower = host.toLowerCase();
  if (!lower.endsWith(`.${domain}`)) return undefined;
  const match = /^(\d{1,5})-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(
    lower.slice(0, lower.length - domain.length - 1),
  );
  if (match === null) return undefined;
  const port = Number(match[1]);
  return port >= 1 && port <= 65_535 ? { sessionId: match[2]!, port } : undefined;
}

/** The origin of a session's port. */
export function originOf(sessionId: string, port: number, domain: string, tls: boolean): string {
  return `${tls ? 'https' : 'http'}://${port}-${sessionId}.${domain}`;
}
