import { describe, expect, it, onTestFinished } from 'vitest';
import { until, type Started } from '../support/processes.js';
import { startSystem, type System } from '../support/system.js';

// API processes take turns to sweep (one SET NX PX per process per turn): the sweep must survive the
// death of the process whose turn it was. Runs on standalone Redis and on Redis Cluster.
describe('sweeping in turns', () => {
  it('the API process whose turn it was SIGKILLed with a host: the session still ends lost within LEASE_MS + SWEEP_INTERVAL_MS + 2 s', async () => {
    const LEASE_MS = 3000;
    const SWEEP_INTERVAL_MS = 2000;
    const system: System = await startSystem({
      workers: 0,
      apiEnv: { SWEEP_INTERVAL_MS: String(SWEEP_INTERVAL_MS) },
      workerEnv: { LEASE_MS: String(LEASE_MS) },
    });
    const second = await system.addApi();
    const host = await system.addWorker('host-doomed', {}, { ownGroup: true });
    const admission = await system.client.spawn((await system.client.issueToken({ userId: 'turn-lost' })).token);
    await until(async () => (await system.client.findSession('turn-lost'))?.state === 'running', 10_000, 'running');
    // Which API process holds the turn now: the turn key names its sweeper, which it logged at start.
    const redis = system.connect();
    onTestFinished(() => redis.disconnect());
    let sweeping: Started | undefined;
    await until(
      async () => {
        const owner = await redis.get(`${system.keyPrefix}:{sweep}:turn`);
        sweeping = [system.api, second].find((p) => p.logs.some((l) => l['sweeperId'] === owner));
        return sweeping !== undefined;
      },
      10_000,
      'the sweeping process',
    );
    const survivor = sweeping === system.api ? second.client : system.client;
    const killedAt = Date.now();
    process.kill(-host.child.pid!, 'SIGKILL');
    sweeping!.child.kill('SIGKILL');
    let ended: { state: string; endedAt: string } | undefined;
    await until(
      async () => {
        ended = (await survivor.history('turn-lost')).find((h) => h.sessionId === admission.sessionId);
        return ended !== undefined;
      },
      LEASE_MS + SWEEP_INTERVAL_MS + 5000,
      'the session ended',
    );
    console.info(
      `sweeper and host SIGKILLed: the session ended ${ended!.state} ${Date.parse(ended!.endedAt) - killedAt} ms later`,
    );
    expect(ended!.state).toBe('lost');
    expect(Date.parse(ended!.endedAt) - killedAt).toBeLessThanOrEqual(LEASE_MS + SWEEP_INTERVAL_MS + 2000);
  }, 60_000);
});
