import { randomUUID } from 'node:crypto';
import type { OutputLineData } from '@cq/contract';
import { NoSessionError } from '@cq/client';
import type { Claim } from '@cq/coordinator';
import { describe, expect, it } from 'vitest';
import { claimAs, jsonHeaders, send, startTestApi, type TestApi } from '../test-support/app.js';

const keeping = { keepLines: 100, keepForMs: 60_000, droppedBytes: 0 };

async function running(api: TestApi, userId: string): Promise<Claim> {
  return claimAs(api, await api.client.spawn((await api.client.issueToken({ userId })).token));
}

/** Appends lines as a worker host would: `o:text` for stdout, `e:text` for stderr. */
async function print(api: TestApi, claim: Claim, ...lines: string[]): Promise<void> {
  await api.coordinator.output.append(
    claim.userId,
    claim.sessionId,
    lines.map((l) => ({ stream: l.startsWith('e:') ? 'stderr' : 'stdout', line: l.slice(2) })),
    keeping,
  );
}

async function collect(lines: AsyncIterable<OutputLineData>): Promise<string[]> {
  const got: string[] = [];
  for await (const line of lines) got.push(line.line);
  return got;
}

describe('a session output route (GET /v1/users/{userId}/sessions/{sessionId}/logs)', async () => {
  const api = await startTestApi({ TOKEN_LIMIT: '1000', SPAWN_INTERVAL_MS: '1', SPAWN_BURST: '100' });
  const path = (userId: string, sessionId: string, query = ''): string =>
    `/v1/users/${userId}/sessions/${sessionId}/logs${query}`;

  it('answers the lines in order with stream and time, in exact pages', async () => {
    const claim = await running(api, 'logs-pages');
    await print(api, claim, 'o:one', 'e:two', 'o:three');
    const all = await api.client.logs('logs-pages', claim.sessionId);
    expect(all.lines.map((l) => [l.stream, l.line])).toEqual([
      ['stdout', 'one'],
      ['stderr', 'two'],
      ['stdout', 'three'],
    ]);
    expect(all).toMatchObject({ droppedBytes: 0, more: false });
    for (const line of all.lines) expect(new Date(line.at).toISOString()).toBe(line.at);
    const first = await api.client.logs('logs-pages', claim.sessionId, { limit: 2 });
    expect(first.lines.map((l) => l.line)).toEqual(['one', 'two']);
    expect(first.more).toBe(true);
    const rest = await api.client.logs('logs-pages', claim.sessionId, { after: first.lines[1]!.id, limit: 2 });
    expect(rest.lines.map((l) => l.line)).toEqual(['three']);
    expect(rest.more).toBe(false);
    await api.coordinator.claims.finish(claim, 'completed', 0);
    expect((await api.client.logs('logs-pages', claim.sessionId)).lines).toHaveLength(3);
  });

  it("is 404 for an unknown session and another user's session, 401 without a key, 400 for a bad page", async () => {
    const claim = await running(api, 'logs-owner');
    await print(api, claim, 'o:mine');
    await expect(api.client.logs('logs-owner', randomUUID())).rejects.toThrow(NoSessionError);
    await expect(api.client.logs('logs-someone-else', claim.sessionId)).rejects.toThrow(NoSessionError);
    const unauthorized = await send(api.baseUrl, 'GET', path('logs-owner', claim.sessionId));
    expect(unauthorized.status).toBe(401);
    for (const query of ['?limit=0', '?limit=1001', '?limit=1.5', '?after=nope', '?other=1']) {
      const answer = await send(api.baseUrl, 'GET', path('logs-owner', claim.sessionId, query), {
        headers: jsonHeaders(),
      });
      expect(answer.status, query).toBe(400);
      expect(answer.body.error.code, query).toBe('invalid_request');
    }
  });

  it('a session id that is not a UUID is 400 naming sessionId, as JSON and as SSE: "<id>:rec" (the key of its output record) never reaches Redis', async () => {
    const claim = await running(api, 'logs-shape');
    await print(api, claim, 'o:kept');
    for (const sessionId of [`${claim.sessionId}:rec`, 'no-such-session', encodeURIComponent(`${claim.sessionId}/x`)])
      for (const accept of ['application/json', 'text/event-stream']) {
        const answer = await send(api.baseUrl, 'GET', path('logs-shape', sessionId), {
          headers: { ...jsonHeaders(), accept },
        });
        expect(answer.status, `${sessionId} ${accept}`).toBe(400);
        expect(answer.body.error).toEqual({
          code: 'invalid_request',
          message:
            'Path parameter "sessionId" is not valid: must be a session id (a UUID, as POST /v1/spawn answered it).',
        });
      }
    expect(api.logs.filter((line) => Number(line['level']) >= 50)).toEqual([]);
  });

  it('as server-sent events: the kept lines, new ones as they come, then end once the session has ended', async () => {
    const claim = await running(api, 'logs-sse');
    await print(api, claim, 'o:before');
    let opened!: () => void;
    const open = new Promise<void>((resolve) => (opened = resolve));
    const lines = api.client.followLogs('logs-sse', claim.sessionId, { onOpen: () => opened() });
    const got = collect(lines);
    await open;
    await print(api, claim, 'o:during', 'e:also');
    await api.coordinator.claims.finish(claim, 'completed', 0);
    expect(await got).toEqual(['before', 'during', 'also']);
    expect(api.app.output.sessions).toBe(0);
  });

  it('a reader that reconnects with Last-Event-ID gets exactly the rest', async () => {
    const claim = await running(api, 'logs-resume');
    await print(api, claim, 'o:a', 'o:b', 'o:c', 'o:d');
    const seen: OutputLineData[] = [];
    for await (const line of api.client.followLogs('logs-resume', claim.sessionId)) {
      seen.push(line);
      if (seen.length === 2) break;
    }
    await api.coordinator.claims.finish(claim, 'completed', 0);
    const rest = await collect(api.client.followLogs('logs-resume', claim.sessionId, { lastEventId: seen[1]!.id }));
    expect(rest).toEqual(['c', 'd']);
  });

  it('as server-sent events, 404 for an unknown session and 400 for a Last-Event-ID that is not a line id', async () => {
    await expect(collect(api.client.followLogs('logs-none', randomUUID()))).rejects.toThrow(NoSessionError);
    const claim = await running(api, 'logs-bad-id');
    const answer = await send(api.baseUrl, 'GET', path('logs-bad-id', claim.sessionId), {
      headers: { ...jsonHeaders(), accept: 'text/event-stream', 'last-event-id': 'nope' },
    });
    expect(answer.status).toBe(400);
  });
});
