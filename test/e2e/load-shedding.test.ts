import { describe, expect, it } from 'vitest';
import { API_KEY, startSystem } from '../support/system.js';
import { until } from '../support/processes.js';
import { setTimeout as sleep } from 'node:timers/promises';

describe('load shedding', () => {
  it('an API whose event loop lags (the process stopped for 400 ms at a time, as a starved CPU or long GC pauses would) answers 503 with Retry-After: 1, then serves again', async () => {
    const system = await startSystem({ workers: 0, apiEnv: { MAX_EVENT_LOOP_DELAY_MS: '100' } });
    const issue = () =>
      fetch(`${system.api.baseUrl}/v1/tokens`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
        body: JSON.stringify({ userId: 'shed' }),
      });
    expect((await issue()).status).toBe(201);

    const pid = system.api.child.pid!;
    for (let i = 0; i < 6; i++) {
      process.kill(pid, 'SIGSTOP');
      await sleep(400); // the fault itself: how long the process is stopped
      process.kill(pid, 'SIGCONT');
      await sleep(20);
    }
    let shed: Response | undefined;
    await until(
      async () => {
        const res = await issue();
        if (res.status === 503) shed = res;
        return shed !== undefined;
      },
      3000,
      'a request shed',
    );
    expect(shed!.headers.get('retry-after')).toBe('1');
    expect(((await shed!.json()) as { error: { code: string } }).error.code).toBe('unavailable');
    await until(async () => (await issue()).status === 201, 5000, 'served again');
    const metrics = await (await fetch(`${system.api.baseUrl}/metrics`)).text();
    expect(metrics).toMatch(/cq_shed_total [1-9]/);
  });
});
