import type { UserEvent } from '@cq/coordinator';
import { iso } from './iso.js';

const wireCache = new WeakMap<UserEvent, string>();

/**
 * The wire form of a session event: the JSON the SSE routes send as `data` and webhooks POST as their
 * body (`at`, `deadline` as ISO-8601). Built once per event however many readers get it.
 */
export function wire(event: UserEvent): string {
  let data = wireCache.get(event);
  if (data === undefined) {
    data = JSON.stringify({
      type: event.type,
      sessionId: event.sessionId,
      userId: event.userId,
      fence: event.fence,
      at: iso(event.at),
      pool: event.pool ?? 'default',
      labels: event.labels ?? {},
      ...(event.workerId === undefined ? {} : { workerId: event.workerId }),
      ...(event.endpoint === undefined ? {} : { endpoint: event.endpoint }),
      ...(event.port === undefined ? {} : { port: event.port }),
      ...(event.deadline === undefined ? {} : { deadline: iso(event.deadline) }),
      ...(event.lifetimeMs === undefined ? {} : { lifetimeMs: event.lifetimeMs }),
      ...(event.exitCode === undefined ? {} : { exitCode: event.exitCode }),
      ...(event.reason === undefined ? {} : { reason: event.reason }),
    });
    wireCache.set(event, data);
  }
  return data;
}
