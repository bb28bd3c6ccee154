import type { FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { keyMatcher } from '../plugins/auth.js';

/** The realm browsers show when they ask for the dashboard's credentials. */
export const DASHBOARD_REALM = 'worker-coordinator dashboard';

/**
 * HTTP Basic auth for every page, asset and data endpoint under the dashboard: any user name, a
 * service key as password; 401 with `WWW-Authenticate` otherwise. The key is compared in constant
 * time and never logged.
 */
export function requireDashboardKey(keys: readonly string[]): onRequestAsyncHookHandler {
  const matches = keyMatcher(keys);
  return async (request, reply) => {
    const key = dashboardKeyOf(request);
    if (key !== undefined && matches(key)) return;
    await reply
      .code(401)
      .header('WWW-Authenticate', `Basic realm="${DASHBOARD_REALM}", charset="UTF-8"`)
      .header('Cache-Control', 'no-store')
      .send({ error: { code: 'unauthorized', message: 'Sign in with any user name and a service key as password.' } });
  };
}

/** The password of a request's HTTP Basic credentials: the service key an operator signed in with. */
export function dashboardKeyOf(request: FastifyRequest): string | undefined {
  const header = request.headers.authorization;
  const match = typeof header === 'string' ? /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(header) : null;
  if (match === null) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon < 0 ? undefined : decoded.slice(colon + 1);
}
