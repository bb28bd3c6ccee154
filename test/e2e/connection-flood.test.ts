import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { once } from 'node:events';
import { CoordinatorClient } from '@cq/client';
import { randomPrefix } from '@cq/test-harness';
import { describe, expect, it } from 'vitest';
import { ROOT, alive, startApi, until } from '../support/processes.js';
import { currentTarget, targetEnv } from '../support/target.js';

const API_KEY = 'flood-test-key-0123456789';
/** The API's open-file limit in this test: low, so that the flood outnumbers it many times. */
const FILE_LIMIT = 256;

describe('a flood of connections from clients without a key', () => {
  it(`more sockets than the API has descriptors (${FILE_LIMIT}), held and reopened for 3 s, bare and as keyless event streams: the API neither exits nor outgrows its descriptors, and answers /healthz and a valid spawn within a second of the release`, async () => {
    const api = await startApi(
      {
        ...targetEnv(currentTarget()),
        API_KEYS: API_KEY,
        KEY_PREFIX: randomPrefix(),
        // No worker host here: the spawn is admitted beyond capacity (the capacity check has its own tests).
        CAPACITY_CHECK: 'false',
      },
      { nofile: FILE_LIMIT },
    );
    const pid = api.child.pid!;
    const client = new CoordinatorClient({ baseUrl: api.baseUrl, apiKey: API_KEY });
    const { token } = await client.issueToken({ userId: 'after-the-flood' });

    // The observer: the API's open descriptors, read from /proc while the flood lasts.
    let mostDescriptors = 0;
    const sampler = setInterval(() => {
      try {
        mostDescriptors = Math.max(mostDescriptors, readdirSync(`/proc/${pid}/fd`).length);
      } catch {
        // gone: the assertions below say so
      }
    }, 10);
    const flood = spawn(
      process.execPath,
      [`${ROOT}test/support/connection-flood.mjs`, new URL(api.baseUrl).port, String(FILE_LIMIT * 3), '3000'],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    let report = '';
    flood.stdout.on('data', (chunk: Buffer) => (report += chunk.toString()));
    await once(flood, 'exit');
    const releasedAt = performance.now();
    clearInterval(sampler);
    const flooded = JSON.parse(report) as { opened: number; refused: number; maxOpenAtOnce: number };

    // Within a second of the release: the process answers, and a valid token is admitted.
    const healthy = async (): Promise<boolean> =>
      (await fetch(`${api.baseUrl}/healthz`, { signal: AbortSignal.timeout(500) }).catch(() => undefined))?.status ===
      200;
    await until(healthy, 1000, '/healthz answers 200 after the release');
    const admitted = await client.spawn(token);
    const answeredWithinMs = performance.now() - releasedAt;

    expect(admitted).toMatchObject({ userId: 'after-the-flood', state: 'pending', fence: 1 });
    expect(answeredWithinMs).toBeLessThan(1000);
    expect(alive(pid)).toBe(true);
    // The flood did outnumber the descriptors, and the process kept below its limit all along.
    expect(flooded.opened).toBeGreaterThan(FILE_LIMIT);
    expect(mostDescriptors).toBeGreaterThan(0);
    expect(mostDescriptors).toBeLessThan(FILE_LIMIT);
    // It said what it refused (once per 10 s, not once per connection), and nothing went to stderr.
    const warnings = api.logs.filter((l) => typeof l['overMaxConnections'] === 'number');
    expect(warnings.length).toBeGreaterThanOrEqual(1);
    expect(warnings.length).toBeLessThanOrEqual(2);
    expect(api.stderr.join('')).toBe('');
    expect(await api.stop('SIGTERM')).toBe(0);
  });
});
