import { describe, expect, it } from 'vitest';
import { API_KEY, startSystem } from '../support/system.js';
import { until } from '../support/processes.js';

/** One page of `GET /v1/sessions`, as a client sees it. */
async function page(
  baseUrl: string,
  query: string,
): Promise<{ sessions: Array<{ sessionId: string; userId: string; state: string }>; next?: string }> {
  const res = await fetch(`${baseUrl}/v1/sessions?${query}`, { headers: { authorization: `Bearer ${API_KEY}` } });
  expect(res.status).toBe(200);
  return (await res.json()) as never;
}

describe('the session list, from outside', () => {
  it('pages of 7 while sessions start and end under the walk: every session live for the whole walk exactly once; labels reach the session', async () => {
    const system = await startSystem({ workers: 2, workerEnv: { SLOTS: '40' } });
    const { client } = system;
    const spawn = async (userId: string, labels: Record<string, string>, metadata: Record<string, unknown> = {}) =>
      client.spawn((await client.issueToken({ userId, labels, metadata })).token);
    // Sessions that run through the whole walk, pending and running alike.
    const stayers: string[] = [];
    for (let i = 0; i < 24; i++) stayers.push((await spawn(`list-stay-${i}`, { walk: 'e2e' })).sessionId);
    const labelled = await spawn('list-env', { walk: 'e2e', job: 'j-7' }, { printLabels: true });
    stayers.push(labelled.sessionId);
    await until(
      async () => (await client.findSession('list-env'))?.state === 'running',
      15_000,
      'the labelled session running',
    );
    // Each page: two newcomers start, the oldest newcomer still live ends.
    let churn = 0;
    const comers: string[] = [];
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const answer = await page(
        system.api.baseUrl,
        `label=walk%3De2e&limit=7${cursor === undefined ? '' : `&cursor=${cursor}`}`,
      );
      expect(answer.sessions.length).toBeLessThanOrEqual(7);
      seen.push(...answer.sessions.map((s) => s.sessionId));
      cursor = answer.next;
      pages++;
      for (let n = 0; n < 2; n++) {
        const userId = `list-come-${churn++}`;
        await spawn(userId, { walk: 'e2e' });
        comers.push(userId);
      }
      const leaving = comers.shift();
      if (leaving !== undefined) await client.stopSession(leaving);
    } while (cursor !== undefined);
    expect(pages).toBeGreaterThanOrEqual(4);
    expect(new Set(seen).size, 'no session twice').toBe(seen.length);
    for (const id of stayers)
      expect(
        seen.filter((s) => s === id),
        id,
      ).toHaveLength(1);

    // The session process got its labels and pool.
    await until(
      async () => (await client.logs('list-env', labelled.sessionId)).lines.some((l) => l.line.startsWith('labels ')),
      10_000,
      'the labels line',
    );
    const line = (await client.logs('list-env', labelled.sessionId)).lines.find((l) => l.line.startsWith('labels '));
    expect(line!.line).toBe('labels {"walk":"e2e","job":"j-7"} pool default');
    // By id, and stopped in bulk by label.
    expect(await client.getSession({ sessionId: labelled.sessionId })).toMatchObject({ userId: 'list-env' });
    let stopped = 0;
    for (let more = true; more;) {
      const answer = await client.stopSessions({ labels: { walk: 'e2e' } });
      stopped += answer.stopping;
      more = answer.more;
    }
    expect(stopped).toBeGreaterThanOrEqual(stayers.length);
    await until(
      async () => (await page(system.api.baseUrl, 'label=walk%3De2e&limit=100')).sessions.length === 0,
      20_000,
      'every labelled session ended',
    );
  });
});
