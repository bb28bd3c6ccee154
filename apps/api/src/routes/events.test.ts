import { connect } from 'node:net';
import type { StreamedEvent } from '@cq/client';
import { finalEventTypes, type SessionEventType } from '@cq/contract';
import {
  finalEventTypes as coordinatorFinalEventTypes,
  type Claim,
  type SessionEventType as CoordinatorEventType,
} from '@cq/coordinator';
import { describe, expect, expectTypeOf, it } from 'vitest';
import { TEST_API_KEY, send, startTestApi, type TestApi } from '../test-support/app.js';
import { EVENT_ID_CLOCK_SKEW_MS } from './events.js';

const worker = { workerId: 'host-1', leaseMs: 10_000, graceMs: 1000 };

/** Spawns a session for `userId` through the API and claims it as a worker host would. */
async function running(api: TestApi, userId: string): Promise<Claim> {
  const admitted = await api.client.spawn((await api.client.issueToken({ userId })).token);
  const outcome = await api.coordinator.claims.claim(admitted, worker);
  if (!outcome.claimed) throw new Error('not claimed');
  return outcome.claim;
}

/** Event ids (`<ms>-<seq>-<slot>`) in their order. */
function compareIds(a: string, b: string): number {
  const [x, y] = [a, b].map((id) => id.split('-').map(Number));
  return x![0]! - y![0]! || x![1]! - y![1]! || x![2]! - y![2]!;
}

/** Reads a stream to its end, or until `enough` events arrived. */
async function take(stream: AsyncGenerator<StreamedEvent>, enough = Infinity): Promise<StreamedEvent[]> {
  const events: StreamedEvent[] = [];
  for await (const event of stream) {
    events.push(event);
    if (events.length >= enough) break;
  }
  return events;
}

describe('event types', () => {
  it('the contract names exactly the event types the coordinator writes, and the same final ones', () => {
    expectTypeOf<SessionEventType>().toEqualTypeOf<CoordinatorEventType>();
    expect(new Set(finalEventTypes)).toEqual(coordinatorFinalEventTypes);
  });
});

describe('event streams (SSE)', async () => {
  const api = await startTestApi(
    { TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' },
    { eventFeed: { maxQueued: 1000 } },
  );

  it("a user's stream: pending, running, ready with its endpoint, completed with its exit code, then it ends", async () => {
    const stream = api.client.events({ userId: 'sse-ann' });
    const done = take(stream);
    // The stream is open (its subscription exists) before the session is spawned.
    await expect.poll(() => api.app.events.subscribers).toBe(1);
    const claim = await running(api, 'sse-ann');
    await api.coordinator.claims.markReady(claim, 'http://10.0.0.7:8888/lab');
    await api.coordinator.claims.finish(claim, 'completed', 0);
    const events = await done;
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'ready', 'completed']);
    expect(events[2]).toMatchObject({ endpoint: 'http://10.0.0.7:8888/lab', sessionId: claim.sessionId });
    expect(events[3]).toMatchObject({ exitCode: 0, userId: 'sse-ann', fence: claim.fence, workerId: 'host-1' });
    for (const event of events) if (event.type !== 'error') expect(new Date(event.at).toISOString()).toBe(event.at);
    expect(api.app.events.subscribers).toBe(0);
    expect(String((await send(api.baseUrl, 'GET', '/metrics')).body)).toContain('cq_event_readers 0');
  });

  it('a late subscriber gets the current state first (ready, with its endpoint), then the rest', async () => {
    const claim = await running(api, 'sse-late');
    await api.coordinator.claims.markReady(claim, 'late:9000');
    const stream = api.client.events({ userId: 'sse-late' });
    const first = await stream.next();
    expect(first.value).toMatchObject({ type: 'ready', endpoint: 'late:9000', sessionId: claim.sessionId });
    await api.client.stopSession('sse-late');
    await api.coordinator.claims.finish(claim, 'stopped', 143);
    expect((await take(stream)).map((e) => e.type)).toEqual(['stopping', 'stopped']);
  });

  it('a lost session says why (host_lost), and the stream ends with it', async () => {
    const claim = await running(api, 'sse-lost');
    const stream = api.client.events({ userId: 'sse-lost' });
    expect((await stream.next()).value).toMatchObject({ type: 'running' });
    // The host "dies": its lease is deleted as if it had run out; the next read settles the session.
    await api.coordinator.redis.del(api.coordinator.keys.user('sse-lost').lease);
    await api.client.findSession('sse-lost');
    expect(await take(stream)).toEqual([
      expect.objectContaining({ type: 'lost', reason: 'host_lost', fence: claim.fence }),
    ]);
  });

  it('a session its memory cap killed ends failed with reason out_of_memory, and the stream ends with it', async () => {
    const claim = await running(api, 'sse-oom');
    const stream = api.client.events({ userId: 'sse-oom' });
    expect((await stream.next()).value).toMatchObject({ type: 'running' });
    await api.coordinator.claims.finish(claim, 'failed', 137, 'out_of_memory');
    expect(await take(stream)).toEqual([
      expect.objectContaining({ type: 'failed', reason: 'out_of_memory', exitCode: 137, fence: claim.fence }),
    ]);
  });

  it("a user's stream carries ids; Last-Event-ID resumes after one: the events after it, never the current state again", async () => {
    const claim = await running(api, 'sse-resume');
    const [current] = await take(api.client.events({ userId: 'sse-resume' }), 1);
    expect(current).toMatchObject({ type: 'running', sessionId: claim.sessionId });
    const currentId = current!.type === 'error' ? '' : current!.id!;
    expect(currentId).toMatch(/^\d+-\d+-\d+$/);
    await api.coordinator.claims.markReady(claim, 'resume:1');
    await api.client.stopSession('sse-resume');
    await api.coordinator.claims.finish(claim, 'stopped', 143);
    // After the current state's id: the events after it, in order (a change the state already showed may
    // come again: the id marks when the stream joined the feed, which the state read followed), then the
    // stream ends with the final one.
    const afterCurrent = await take(api.client.events({ userId: 'sse-resume', lastEventId: currentId }));
    const types = afterCurrent.map((e) => e.type);
    expect(types.slice(-3)).toEqual(['ready', 'stopping', 'stopped']);
    expect(['pending', 'running']).toEqual(expect.arrayContaining(types.slice(0, -3)));
    const ids = afterCurrent.map((e) => (e.type === 'error' ? '' : e.id!));
    expect([...ids].sort(compareIds)).toEqual(ids);
    for (const id of ids) expect(compareIds(id, currentId)).toBeGreaterThan(0);
    // After a real event's id: exactly the events after it.
    const afterReady = await take(api.client.events({ userId: 'sse-resume', lastEventId: ids.at(-3)! }));
    expect(afterReady.map((e) => (e.type === 'error' ? '' : e.id))).toEqual(ids.slice(-2));
  });

  it('/v1/events carries ids; Last-Event-ID resumes exactly after one; a malformed one is a 400 and an expired one an error event', async () => {
    const all = api.client.events();
    const firstFour = take(all, 4);
    await expect.poll(() => api.app.events.subscribers).toBeGreaterThanOrEqual(1);
    const claim = await running(api, 'sse-all');
    await api.coordinator.claims.markReady(claim);
    await api.coordinator.claims.finish(claim, 'failed', 3);
    const events = await firstFour;
    expect(events.map((e) => e.type)).toEqual(['pending', 'running', 'ready', 'failed']);
    const ids = events.map((e) => (e.type === 'error' ? '' : e.id!));
    expect(ids.every((id) => /^\d+-\d+-\d+$/.test(id))).toBe(true);
    const resumed = await take(api.client.events({ lastEventId: ids[1]! }), 2);
    expect(resumed.map((e) => (e.type === 'error' ? '' : e.id))).toEqual(ids.slice(2));

    const bad = await send(api.baseUrl, 'GET', '/v1/events', {
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'last-event-id': 'yesterday' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('invalid_request');
    expect(bad.body.error.message).toContain('Last-Event-ID');
    const expired = await take(api.client.events({ lastEventId: '1000-0-1' }), 1);
    expect(expired[0]).toMatchObject({ type: 'error', code: 'events_expired' });
  });

  it('a Last-Event-ID beyond now + the clock skew is a 400 that says so, not a stream that sends nothing; within the skew it streams', async () => {
    const headers = (id: string) => ({ authorization: `Bearer ${TEST_API_KEY}`, 'last-event-id': id });
    for (const ahead of [EVENT_ID_CLOCK_SKEW_MS + 5000, 3_600_000, 10 * 365 * 86_400_000]) {
      const res = await send(api.baseUrl, 'GET', '/v1/events', { headers: headers(`${Date.now() + ahead}-0-0`) });
      expect(res.status, `${ahead} ms ahead`).toBe(400);
      expect(res.body.error).toEqual({
        code: 'invalid_request',
        message: expect.stringContaining(`more than ${EVENT_ID_CLOCK_SKEW_MS / 1000} s in the future`),
      });
    }
    const abort = new AbortController();
    const near = await fetch(`${api.baseUrl}/v1/events`, {
      headers: headers(`${Date.now() + 5000}-0-0`),
      signal: abort.signal,
    });
    expect(near.status).toBe(200);
    expect(near.headers.get('content-type')).toMatch(/^text\/event-stream/);
    abort.abort();
  });

  it('the OpenAPI document declares both streams as text/event-stream, and their errors as JSON', async () => {
    const doc = (await send(api.baseUrl, 'GET', '/openapi.json')).body;
    for (const path of ['/v1/events', '/v1/users/{userId}/session/events']) {
      const responses = doc.paths[path].get.responses;
      expect(Object.keys(responses['200'].content)).toEqual(['text/event-stream']);
      expect(Object.keys(responses['400'].content)).toEqual(['application/json']);
    }
  });

  it('needs the service key', async () => {
    for (const path of ['/v1/events', '/v1/users/sse-x/session/events']) {
      const res = await send(api.baseUrl, 'GET', path);
      expect(res.status).toBe(401);
    }
    expect(
      (
        await send(api.baseUrl, 'GET', '/v1/users/bad%20id/session/events', {
          headers: { authorization: `Bearer ${TEST_API_KEY}` },
        })
      ).status,
    ).toBe(400);
  });

  it('a client that never reads is disconnected once it falls behind; the others go on, and nothing is held for it', async () => {
    // Streams of the tests before, closed by their clients, may still be closing here.
    await expect.poll(() => api.app.events.subscribers).toBe(0);
    // A raw socket that asks for the stream and then never reads a byte.
    const socket = connect(Number(new URL(api.baseUrl).port), '127.0.0.1');
    socket.pause();
    socket.write(`GET /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${TEST_API_KEY}\r\n\r\n`);
    await expect.poll(() => api.app.events.subscribers).toBeGreaterThanOrEqual(1);
    const reader = api.client.events();
    let readerEvents = 0;
    const readerDone = (async () => {
      for await (const event of reader) {
        readerEvents++;
        if (event.type === 'completed' && event.userId === 'sse-flood') return;
      }
    })();
    await expect.poll(() => api.app.events.subscribers).toBe(2);
    // About 8 MB of events (12,000 ready events with 500-character endpoints): more than the socket
    // buffers between the API and the idle client hold, so the API's writes to it block.
    const claim = await running(api, 'sse-flood');
    const count = 12_000;
    for (let first = 0; first < count; first += 50)
      await Promise.all(
        Array.from({ length: 50 }, (_, i) =>
          api.coordinator.claims.markReady(claim, `h${first + i}:${'x'.repeat(500)}`),
        ),
      );
    await api.coordinator.claims.finish(claim, 'completed', 0);
    await readerDone;
    expect(readerEvents).toBe(count + 3);
    // The API let go of the idle client: its subscription is gone and the log says why.
    await expect
      .poll(() => api.logs.some((line) => line.msg === 'event stream reader too slow; disconnected'))
      .toBe(true);
    await expect.poll(() => api.app.events.subscribers).toBe(0);
    socket.destroy();
  });
});
