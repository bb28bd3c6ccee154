import {
  EVENT_RETENTION_MS,
  finalEventTypes,
  parseEventId,
  type EventSubscription,
  type SessionEvent,
  type SessionEventType,
  type SessionView,
} from '@cq/coordinator';
import { errorSchema, userParams } from '@cq/contract';
import type { FastifyReply } from 'fastify';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { HttpError } from '../http-errors.js';
import { iso } from '../iso.js';
import { requireServiceKey } from '../plugins/auth.js';

/** A comment line this often keeps an idle stream open through proxies that close quiet connections. */
export const SSE_HEARTBEAT_MS = 15_000;

/** The 200 of both routes: a stream, not JSON (error answers stay JSON). */
const eventStream = {
  description: 'Server-sent events: `event: <type>`, `data: <JSON>` (see docs/http-api.md, "Event streams")',
  content: { 'text/event-stream': { schema: z.string() } },
} as const;
const lastEventIdHeader = z.object({
  'last-event-id': z.string().max(64).optional().describe('Resume after this event id (EventSource sends it)'),
});

/** The wire form of an event (`at`, `deadline` as ISO-8601), built once however many readers get it. */
const wireCache = new WeakMap<SessionEvent, string>();
function wire(event: SessionEvent): string {
  let data = wireCache.get(event);
  if (data === undefined) {
    data = JSON.stringify({
      type: event.type,
      sessionId: event.sessionId,
      userId: event.userId,
      fence: event.fence,
      at: iso(event.at),
      ...(event.workerId === undefined ? {} : { workerId: event.workerId }),
      ...(event.endpoint === undefined ? {} : { endpoint: event.endpoint }),
      ...(event.deadline === undefined ? {} : { deadline: iso(event.deadline) }),
      ...(event.lifetimeMs === undefined ? {} : { lifetimeMs: event.lifetimeMs }),
      ...(event.exitCode === undefined ? {} : { exitCode: event.exitCode }),
      ...(event.reason === undefined ? {} : { reason: event.reason }),
    });
    wireCache.set(event, data);
  }
  return data;
}

/** Order of a session's states: an event that does not move past what a reader saw is not news. */
function rankOf(type: SessionEventType): number {
  switch (type) {
    case 'pending':
      return 0;
    case 'running':
      return 1;
    case 'ready':
      return 2;
    case 'stopping':
      return 3;
    default:
      return 4;
  }
}

/** The current state of a live session, as the first event of a user's stream. */
function currentStateEvent(session: SessionView): Omit<SessionEvent, 'id' | 'position'> {
  const type: SessionEventType = session.state === 'running' && session.ready ? 'ready' : session.state;
  return {
    type,
    sessionId: session.sessionId,
    userId: session.userId,
    fence: session.fence,
    at: session.state === 'pending' ? session.createdAt : (session.startedAt ?? session.createdAt),
    ...(session.workerId === undefined ? {} : { workerId: session.workerId }),
    ...(type === 'ready' && session.endpoint !== undefined ? { endpoint: session.endpoint } : {}),
    ...(type === 'running' && session.deadline !== undefined ? { deadline: session.deadline } : {}),
    ...(type === 'pending' ? { lifetimeMs: session.lifetimeMs } : {}),
  };
}

/**
 * Starts the stream: headers out at once (a reader learns it is connected before the first event), and
 * the subscription's end tied to the connection's. A reader that fell behind is cut off: it cannot be
 * told on a socket it does not read, and it resumes from its last event's id.
 */
export function openStream(reply: FastifyReply, subscription: EventSubscription): void {
  reply.sse.onClose(() => subscription.close());
  reply.raw.once('close', () => subscription.close());
  // Ended by the feed (shutdown): a stream still waiting on a full socket is cut, so SIGTERM is not held.
  subscription.onEnd((failure) => {
    if (failure === undefined && reply.raw.writableNeedDrain) reply.raw.destroy();
  });
  subscription.onEnd((failure) => {
    if (failure !== undefined) {
      reply.log.info({ reason: failure.message }, 'event stream reader too slow; disconnected');
      reply.raw.destroy();
    }
  });
  reply.sse.keepAlive();
  reply.sse.sendHeaders();
  reply.raw.flushHeaders();
}

/**
 * Sends every event of `subscription` with its id until the subscription or the connection ends, then
 * ends the response. A reader that went away, or fell behind, ends its own stream only.
 */
export async function streamEvents(reply: FastifyReply, subscription: EventSubscription): Promise<void> {
  try {
    for await (const event of subscription)
      if (!(await send(reply, { id: event.id, event: event.type, data: wire(event) }))) break;
  } catch (err) {
    reply.log.info({ err: { message: (err as Error).message } }, 'event stream ended');
  }
  reply.sse.close();
}

const closedReplies = new WeakMap<FastifyReply, Promise<false>>();

/**
 * Sends one event; false once the connection is gone. A write waiting for a full socket to drain
 * gives up when the socket closes (@fastify/sse's own wait would not: it listens for drain or error).
 */
async function send(reply: FastifyReply, message: { id?: string; event: string; data: string }): Promise<boolean> {
  if (!reply.sse.isConnected || reply.raw.destroyed) return false;
  let closed = closedReplies.get(reply);
  if (closed === undefined) {
    closed = new Promise<false>((resolve) => reply.raw.once('close', () => resolve(false)));
    closedReplies.set(reply, closed);
  }
  return Promise.race([reply.sse.send(message).then(() => true), closed]);
}

/** Session events as server-sent events: every session's (`/v1/events`), or one user's. */
export const eventRoutes: FastifyPluginAsyncZod = async (app) => {
  const auth = requireServiceKey(app.config.apiKeys);

  app.get(
    '/v1/events',
    {
      sse: { kind: 'manual' },
      preHandler: auth,
      schema: {
        summary: 'Every session event of every user, as server-sent events with ids (resume with Last-Event-ID)',
        security: [{ serviceKey: [] }],
        headers: lastEventIdHeader,
        response: { 200: eventStream, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const lastEventId = request.headers['last-event-id'];
      const after = lastEventId === undefined ? undefined : parseEventId(lastEventId);
      if (lastEventId !== undefined && after === undefined)
        throw new HttpError(
          'invalid_request',
          `Last-Event-ID "${lastEventId.slice(0, 64)}" is not an event id of this API (<ms>-<seq>-<slot>); ` +
            'reconnect without it to read from now on.',
        );
      const subscription = await app.events.subscribe(after === undefined ? {} : { after });
      openStream(reply, subscription);
      if (subscription.expired)
        await reply.sse.send({
          event: 'error',
          data: JSON.stringify({
            code: 'events_expired',
            message:
              `Events before ${iso(Date.now() - EVENT_RETENTION_MS)} are no longer kept, so those after ` +
              `${lastEventId} cannot all be sent; the stream goes on from now. Read the sessions' state again.`,
          }),
        });
      await streamEvents(reply, subscription);
    },
  );

  app.get(
    '/v1/users/:userId/session/events',
    {
      sse: { kind: 'manual' },
      preHandler: auth,
      schema: {
        summary: "The user's current or next session as server-sent events: its state, then each change, until it ends",
        security: [{ serviceKey: [] }],
        params: userParams,
        response: { 200: eventStream, 400: errorSchema, 401: errorSchema, 503: errorSchema },
      },
    },
    async (request, reply) => {
      const { userId } = request.params;
      // Subscribe before reading, so nothing between the read and the first event is missed.
      const subscription = await app.events.subscribe({ userId });
      let current: SessionView | undefined;
      try {
        current = await app.coordinator.sessions.settleAndRead(userId);
      } catch (err) {
        subscription.close();
        throw err;
      }
      openStream(reply, subscription);
      let seen: { fence: number; rank: number; endpoint: string | undefined } | undefined;
      const sendEvent = async (event: Omit<SessionEvent, 'id' | 'position'>): Promise<boolean> => {
        seen = { fence: event.fence, rank: rankOf(event.type), endpoint: event.endpoint };
        return send(reply, { event: event.type, data: wire(event as SessionEvent) });
      };
      try {
        if (current !== undefined && !(await sendEvent(currentStateEvent(current)))) return;
        for await (const event of subscription) {
          // No session when we looked: an ending queued before the look is the previous session's.
          if (seen === undefined && event.type !== 'pending') continue;
          if (seen !== undefined && event.fence < seen.fence) continue;
          if (seen !== undefined && event.fence === seen.fence) {
            const rank = rankOf(event.type);
            if (
              rank < seen.rank ||
              (rank === seen.rank && (event.type !== 'ready' || event.endpoint === seen.endpoint))
            )
              continue;
          }
          if (!(await sendEvent(event))) break;
          // A withdrawn admission never was: wait for the user's next session. Any other ending ends the stream.
          if (event.type === 'withdrawn') seen = undefined;
          else if (finalEventTypes.has(event.type)) break;
        }
      } catch (err) {
        request.log.info({ err: { message: (err as Error).message } }, 'event stream ended');
      } finally {
        subscription.close();
        reply.sse.close();
      }
    },
  );
};
