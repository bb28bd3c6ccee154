import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import type { Context } from '../context.js';
import { Keys } from '../keys.js';
import { Scripts } from '../script-runner.js';
import { slotOf } from '../slots.js';
import { issueAndAdmit, testCoordinator } from '../test-support/setup.js';
import { ListUpgrade } from './list-upgrade.js';

describe("the session list's upgrade", () => {
  it('reports a check that failed and checks its slots again at the next call, until one succeeds', async () => {
    const c = testCoordinator({ policy: { spawnIntervalMs: 1 } });
    await issueAndAdmit(c, 'from-before-the-list');
    const slot = slotOf(c.keys.user('from-before-the-list').session);
    // As a deployment from before the list has it: no directory entry, no `listed` key.
    await c.redis.del(c.keys.directory().slots, c.keys.directory().generations, c.keys.listed(slot));
    // The same Redis, whose pipelines fail while `down` (the upgrade's EXISTS go in one).
    let down = true;
    const real = c.redis as Redis;
    const redis = new Proxy(real, {
      get: (target, name) => {
        if (name === 'pipeline' && down) throw new Error('Connection is closed.');
        const value: unknown = Reflect.get(target, name);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const context: Context = { redis, scripts: new Scripts(real), keys: new Keys(c.keys.prefix) };
    const errors: unknown[] = [];
    const upgrade = new ListUpgrade(context, (err) => errors.push(err));

    expect(await upgrade.check([slot])).toBe(0);
    expect(errors).toHaveLength(1);
    expect(await c.redis.exists(c.keys.listed(slot))).toBe(0);

    down = false;
    expect(await upgrade.check()).toBe(1);
    expect(await c.redis.exists(c.keys.listed(slot))).toBe(1);
    expect(await upgrade.check()).toBe(0);
    expect(errors).toHaveLength(1);
  });
});
