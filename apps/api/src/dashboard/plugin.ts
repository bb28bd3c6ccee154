import helmet from '@fastify/helmet';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { dashboardActions, type DashboardActionsOptions } from './actions.js';
import { antiForgeryToken, dashboardKeyOf, requireDashboardKey } from './auth.js';
import { stateQuery } from './list-query.js';
import type { SessionListReader } from '../session-list.js';
import { outputQuery, readOutputTail } from './output.js';
import { lastEventIdHeader, openStream, resumePosition, streamEvents } from '../routes/events.js';
import { pageCss, pageHtml, pageJs, xtermCss, xtermFitJs, xtermJs } from './page.js';
import { RecentEvents } from './recent-events.js';
import { DashboardStateReader } from './state.js';
import { readDashboardWebhooks } from './webhooks.js';

/** Where the dashboard lives. */
export const DASHBOARD_PATH = '/dashboard';

/**
 * Our own pages run no inline script, so they get a strict policy. Inline style is allowed: the terminal
 * (xterm.js) sizes its rows and colours with <style> elements it makes (style cannot run script).
 */
function strictCsp(reply: FastifyReply): FastifyReply {
  return reply.header(
    'Content-Security-Policy',
    "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; " +
      "connect-src 'self'; frame-ancestors 'none'",
  );
}

/**
 * bull-board's pages: its scripts and stylesheet are files of its own (served here), its configuration
 * an inline JSON block (data, not script); its markup carries inline styles, which React also sets.
 */
const BULL_BOARD_CSP =
  "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; frame-ancestors 'none'";

/** bull-board's page links a stylesheet of fonts on a third-party host: the page uses its fallback fonts. */
const THIRD_PARTY_LINK = /<link\b[^>]*\bhref="https?:\/\/[^"]*"[^>]*>/gi;

/** Options of {@link dashboardPlugin}. */
export interface DashboardOptions extends DashboardActionsOptions {
  /** Reads the live table's pages: `GET /v1/sessions`' reader. */
  readonly sessionList: SessionListReader;
}

/**
 * The queue dashboard: the coordinator view at `/dashboard` (live sessions, worker hosts, recent
 * endings, a chart of admissions, the webhooks), its JSON at `/dashboard/api/state` and
 * `/dashboard/api/webhooks`, and bull-board at
 * `/dashboard/queues` (read-only unless `DASHBOARD_ACTIONS=true`), and its actions (actions.ts). Every
 * route under it, assets included, needs HTTP Basic auth with a key holding `dashboard` as password;
 * every state-changing one also `dashboard:act` and the page's origin and anti-forgery token (auth.ts).
 */
export async function dashboardPlugin(app: FastifyInstance, options: DashboardOptions): Promise<void> {
  const scope = app.withTypeProvider<ZodTypeProvider>();
  scope.addHook('onRequest', requireDashboardKey(app.keys));
  // Security headers on every page, asset and data answer under the dashboard. bull-board's page
  // carries inline script, so helmet's default CSP is off here and our own pages set a strict one.
  await scope.register(helmet, {
    contentSecurityPolicy: false,
    frameguard: { action: 'deny' },
    referrerPolicy: { policy: 'no-referrer' },
  });
  scope.addHook('onSend', async (_request, reply, payload) => {
    reply.header('Cache-Control', 'no-store');
    // Every HTML page under the dashboard has a policy and loads nothing from another host: ours set a
    // strict one; bull-board's get theirs here, without the third-party font link.
    if (
      String(reply.getHeader('content-type') ?? '').startsWith('text/html') &&
      !reply.hasHeader('content-security-policy')
    ) {
      reply.header('Content-Security-Policy', BULL_BOARD_CSP);
      if (typeof payload === 'string') {
        return payload.replace(THIRD_PARTY_LINK, '');
      }
    }
    return payload;
  });

  // The newest session events, then every one as it happens (the page's live list, and its cue to
  // refresh the tables), and the recent endings of the state. The newest come from one ring per process:
  // opening a page costs Redis nothing.
  const recentEvents = new RecentEvents(app.events, app.log);
  app.addHook('onClose', async () => recentEvents.close());
  const reader = new DashboardStateReader(
    options.sessionList,
    app.coordinator,
    app.stats,
    recentEvents,
    app.spawnQueues,
  );
  scope.get('/', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/html; charset=utf-8').send(pageHtml),
  );
  scope.get('/app.js', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/javascript; charset=utf-8').send(pageJs),
  );
  scope.get('/app.css', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/css; charset=utf-8').send(pageCss),
  );
  scope.get('/xterm.js', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/javascript; charset=utf-8').send(xtermJs),
  );
  scope.get('/xterm-addon-fit.js', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/javascript; charset=utf-8').send(xtermFitJs),
  );
  scope.get('/xterm.css', { schema: { hide: true } }, async (_request, reply) =>
    strictCsp(reply).type('text/css; charset=utf-8').send(xtermCss),
  );
  scope.get('/api/state', { schema: { hide: true, querystring: stateQuery } }, async (request) =>
    reader.read(request.query),
  );
  // The webhooks, each with the newest attempt of its delivery log (never a secret).
  scope.get('/api/webhooks', { schema: { hide: true } }, async () => readDashboardWebhooks(app.coordinator));
  // The newest lines of a selected session's output, through the logs route with the operator's key.
  scope.get('/api/output', { schema: { hide: true, querystring: outputQuery } }, async (request, reply) => {
    const answer = await readOutputTail(app, dashboardKeyOf(request) ?? '', request.query);
    return reply.code(answer.status).send(answer.body);
  });
  scope.get(
    '/api/events',
    { sse: { kind: 'manual' }, schema: { hide: true, headers: lastEventIdHeader } },
    async (request, reply) => {
      // A reconnecting page has the events up to its last one already.
      const after = resumePosition(request.headers['last-event-id']);
      const { recent, live } = await recentEvents.open(after);
      openStream(reply, live);
      await streamEvents(reply, live, recent);
    },
  );

  // Who signed in, and the actions (each through the API route that does it, with the operator's key).
  await dashboardActions(scope, antiForgeryToken, options);

  const readOnlyMode = !app.config.dashboardActions;
  const serverAdapter = new FastifyAdapter();
  serverAdapter.setBasePath(`${DASHBOARD_PATH}/queues`);
  const board = createBullBoard({
    queues: [],
    serverAdapter,
    options: { uiConfig: { boardTitle: 'worker-coordinator queues' } },
  });
  // Every pool's spawn queues, as they are opened (a pool's when its first session is queued here).
  app.spawnQueues.watchPools((_pool, queues) => {
    for (const queue of queues) board.addQueue(new BullMQAdapter(queue, { readOnlyMode }));
  });
  await scope.register(serverAdapter.registerPlugin(), {
    prefix: '/queues',
    basePath: `${DASHBOARD_PATH}/queues`,
  } as never);
}
