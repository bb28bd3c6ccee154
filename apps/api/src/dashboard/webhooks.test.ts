import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cleanUp, until } from '@cq/test-harness';
import { describe, expect, it } from 'vitest';
import { TEST_API_KEY, send, startTestApi } from '../test-support/app.js';

const basic = { authorization: `Basic ${Buffer.from(`operator:${TEST_API_KEY}`).toString('base64')}` };

interface Row {
  id: string;
  url: string;
  events: string[];
  createdAt: number;
  last?: {
    eventId: string;
    type: string;
    attempt: number;
    status?: number;
    error?: string;
    at: number;
    nextAttemptAt?: number;
  };
}

describe('the dashboard webhooks', async () => {
  const api = await startTestApi({ WEBHOOK_ALLOW_PRIVATE: 'true' });
  // A receiver on 127.0.0.1: `/ok` answers 200, `/down` 503.
  const receiver = createServer((request, response) => {
    request.resume();
    request.on('end', () => response.writeHead(request.url === '/ok' ? 200 : 503).end());
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  cleanUp(
    () =>
      new Promise<void>((resolve) => {
        receiver.closeAllConnections();
        receiver.close(() => resolve());
      }),
  );
  const base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const read = async (): Promise<{ now: number; webhooks: Row[] }> => {
    const res = await send(api.baseUrl, 'GET', '/dashboard/api/webhooks', { headers: basic });
    expect(res.status).toBe(200);
    return res.body;
  };

  it('needs a service key as Basic password', async () => {
    expect((await send(api.baseUrl, 'GET', '/dashboard/api/webhooks')).status).toBe(401);
    const bearer = { authorization: `Bearer ${TEST_API_KEY}` };
    expect((await send(api.baseUrl, 'GET', '/dashboard/api/webhooks', { headers: bearer })).status).toBe(401);
  });

  it('lists every webhook, oldest first, with the newest attempt of its log: status, when, the next attempt; never a secret', async () => {
    expect(await read()).toEqual({ now: expect.any(Number), webhooks: [] });
    const ok = await api.client.createWebhook(`${base}/ok`);
    const down = await api.client.createWebhook(`${base}/down`);
    const ended = await api.client.createWebhook(`${base}/ok`, ['stopped']);
    // One event (no worker host runs: the session stays pending), delivered to the first two webhooks.
    await api.client.spawn((await api.client.issueToken({ userId: 'dash-hook' })).token);
    await until(
      async () => (await read()).webhooks.filter((w) => w.last !== undefined).length === 2,
      15_000,
      'an attempt to each of the two webhooks for every event',
    );
    const { now, webhooks } = await read();
    expect(webhooks.map((w) => w.id)).toEqual([ok.id, down.id, ended.id]);
    const [okRow, downRow, endedRow] = webhooks as [Row, Row, Row];
    expect(okRow).toMatchObject({ url: `${base}/ok`, events: [], createdAt: Date.parse(ok.createdAt) });
    expect(okRow.last).toEqual({
      eventId: expect.any(String),
      type: 'pending',
      attempt: 1,
      status: 200,
      at: expect.any(Number),
    });
    expect(downRow.last).toMatchObject({ eventId: okRow.last!.eventId, type: 'pending', status: 503 });
    expect(downRow.last!.error).toBeUndefined();
    // Not delivered: the next attempt is due after this one (the first retry 5 s later).
    expect(downRow.last!.nextAttemptAt! - downRow.last!.at).toBeGreaterThanOrEqual(5000);
    expect(downRow.last!.at).toBeLessThanOrEqual(now);
    expect(endedRow).toEqual({ id: ended.id, url: `${base}/ok`, events: ['stopped'], createdAt: expect.any(Number) });
    const json = JSON.stringify(webhooks);
    for (const secret of [ok.secret, down.secret, ended.secret]) expect(json).not.toContain(secret.slice(6));
    expect(json).not.toContain('secret');

    // The newest attempt is the one shown; a deleted webhook leaves the list.
    await api.client.stopSession('dash-hook');
    await until(
      async () => {
        const rows = (await read()).webhooks;
        return [ok.id, ended.id].every((id) => rows.find((w) => w.id === id)?.last?.type === 'stopped');
      },
      15_000,
      'the stopped event delivered to both',
    );
    const after = await read();
    expect(after.webhooks.find((w) => w.id === ok.id)!.last).toMatchObject({
      type: 'stopped',
      attempt: 1,
      status: 200,
    });
    expect(after.webhooks.find((w) => w.id === ended.id)!.last).toMatchObject({ type: 'stopped', status: 200 });
    for (const id of [ok.id, down.id, ended.id]) await api.client.deleteWebhook(id);
    expect((await read()).webhooks).toEqual([]);
  }, 40_000);
});
