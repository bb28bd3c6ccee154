import { createHmac, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import { holds, type KeyRing } from '../access.js';
import { HttpError, errorBody } from '../http-errors.js';
import { forbidden, nameCaller } from '../plugins/auth.js';

/** The realm browsers show when they ask for the dashboard's credentials. */
export const DASHBOARD_REALM = 'worker-coordinator dashboard';

/**
 * The anti-forgery cookie and header. These are the names bull-board's HTTP client (axios) reads and
 * sends by itself for same-origin requests, so its queue actions carry the token as the dashboard's do.
 */
export const ANTI_FORGERY_COOKIE = 'XSRF-TOKEN';
export const ANTI_FORGERY_HEADER = 'x-xsrf-token';

/**
 * The anti-forgery token of a signed-in key: an HMAC of a fixed label under the key, the same on every
 * API process and for as long as the key lives, so it needs no state. Only a page of the dashboard's
 * own origin can read it (a cookie of that origin, and `/dashboard/api/me`); another site's page can
 * make the browser send the Basic credentials, but cannot read or send the token.
 */
export function antiForgeryToken(key: string): string {
  return createHmac('sha256', key).update('worker-coordinator dashboard anti-forgery v1').digest('base64url');
}

function sameToken(presented: string, expected: string): boolean {
  const a = Buffer.from(presented);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Methods that change nothing: they need no anti-forgery token. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Why a state-changing request is not the dashboard's own (undefined when it is): it must come from the
 * dashboard's origin (its `Origin` names the host it was sent to; a browser sends `Origin` with every
 * such request) and carry the signed-in key's anti-forgery token in `X-XSRF-Token` (a WebSocket's, in
 * its query: `queryToken`).
 */
export function forgeryReason(request: FastifyRequest, key: string, queryToken?: string): string | undefined {
  const origin = request.headers.origin;
  let originHost: string | undefined;
  try {
    originHost = typeof origin === 'string' && origin !== 'null' ? new URL(origin).host : undefined;
  } catch {
    originHost = undefined;
  }
  if (originHost === undefined || originHost !== request.headers.host)
    return 'it does not come from the dashboard’s own page (its Origin is not this host)';
  const fetchSite = request.headers['sec-fetch-site'];
  if (fetchSite !== undefined && fetchSite !== 'same-origin')
    return `it does not come from the dashboard’s own page (Sec-Fetch-Site: ${String(fetchSite)})`;
  // A WebSocket from the page carries it in its query (`queryToken`): it can send no header of its own.
  const token = queryToken ?? request.headers[ANTI_FORGERY_HEADER];
  if (typeof token !== 'string' || !sameToken(token, antiForgeryToken(key)))
    return 'it lacks the page’s anti-forgery token (X-XSRF-Token); reload the dashboard';
  return undefined;
}

/**
 * HTTP Basic auth for every page, asset and data endpoint under the dashboard: any user name, a key
 * with the `dashboard` scope as password; 401 with `WWW-Authenticate` without a valid key, 403
 * `forbidden` without the scope. A state-changing request (the dashboard's actions, bull-board's when
 * DASHBOARD_ACTIONS=true) also needs `dashboard:act` and must be the dashboard's own (see
 * {@link forgeryReason}); each action's route checks its own scope too. Pages read with a key get its
 * anti-forgery cookie. The key is compared in constant time and never logged: log lines name it.
 */
export function requireDashboardKey(keys: KeyRing): onRequestAsyncHookHandler {
  return async (request, reply) => {
    const key = dashboardKeyOf(request);
    const caller = key === undefined ? undefined : keys.identify(key);
    if (key === undefined || caller === undefined) {
      await reply
        .code(401)
        .header('WWW-Authenticate', `Basic realm="${DASHBOARD_REALM}", charset="UTF-8"`)
        .header('Cache-Control', 'no-store')
        .send({
          error: { code: 'unauthorized', message: 'Sign in with any user name and a service key as password.' },
        });
      return;
    }
    nameCaller(request, reply, caller);
    // Refusals are sent here, not thrown: bull-board's routes have an error handler of their own.
    const refuse = async (err: HttpError): Promise<void> => {
      await reply
        .code(err.status)
        .header('Cache-Control', 'no-store')
        .send(errorBody(err.code, err.message, err.details));
    };
    if (!holds(caller, 'dashboard')) return refuse(forbidden(caller, 'dashboard', 'the dashboard'));
    if (SAFE_METHODS.has(request.method)) {
      setAntiForgeryCookie(request, reply, key);
      return;
    }
    if (!holds(caller, 'dashboard:act')) return refuse(forbidden(caller, 'dashboard:act', 'acting from the dashboard'));
    const forged = forgeryReason(request, key);
    if (forged !== undefined)
      return refuse(
        new HttpError('forbidden', `The dashboard refused this request: ${forged}.`, { scope: 'dashboard:act' }),
      );
  };
}

function setAntiForgeryCookie(request: FastifyRequest, reply: FastifyReply, key: string): void {
  const secure = request.protocol === 'https' ? '; Secure' : '';
  reply.header(
    'Set-Cookie',
    `${ANTI_FORGERY_COOKIE}=${antiForgeryToken(key)}; Path=/dashboard; SameSite=Strict${secure}`,
  );
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
