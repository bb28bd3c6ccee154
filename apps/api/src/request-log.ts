import type { FastifyRequest } from 'fastify';

/**
 * Query parameters whose values the request log keeps: the API's own, none of which is a credential.
 * Any other parameter (a token or key a careless client put in the URL, `?token=…`) is logged by name
 * only, its value `[redacted]`.
 */
const LOGGED_QUERY_PARAMETERS = new Set([
  'after',
  'limit',
  'sessionId',
  'state',
  'pool',
  'workerId',
  'userId',
  'label',
]);

/** A request URL as the log keeps it: the path, and the query with every value not known to be harmless redacted. */
export function loggedUrl(url: string): string {
  const mark = url.indexOf('?');
  if (mark < 0) return url;
  const query = url
    .slice(mark + 1)
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals < 0 ? pair : pair.slice(0, equals);
      return equals < 0 || LOGGED_QUERY_PARAMETERS.has(name) ? pair : `${name}=[redacted]`;
    })
    .join('&');
  return `${url.slice(0, mark)}?${query}`;
}

/** The request as every request log line shows it (Fastify's fields, the URL through {@link loggedUrl}). */
export function requestSerializer(request: FastifyRequest): Record<string, unknown> {
  return {
    method: request.method,
    url: loggedUrl(request.url),
    host: request.host,
    remoteAddress: request.ip,
    remotePort: request.socket?.remotePort,
  };
}
