import { Redis } from 'ioredis';
import { describe, expect, it, onTestFinished } from 'vitest';
import { parseMonitorLine, watchServer } from './monitor.js';
import { startRedisServer } from './redis-server.js';

describe('MONITOR, read on a socket of its own', () => {
  it('parses a line, undoing the escapes Redis writes', () => {
    expect(parseMonitorLine('+1795815817.334761 [0 127.0.0.1:44694] "info"')).toEqual({
      args: ['info'],
      source: '127.0.0.1:44694',
    });
    expect(parseMonitorLine('+1.5 [0 lua] "set" "k" "a\\"b\\\\c\\n\\x01" ""')).toEqual({
      args: ['set', 'k', 'a"b\\c\n\x01', ''],
      source: 'lua',
    });
  });

  it('starts while the server is busy with other clients, and sees each command in order', async () => {
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const busy = new Redis(server.url);
    onTestFinished(() => busy.disconnect());
    let stop = false;
    // Commands arriving all the time: the first MONITOR line often comes in the same read as MONITOR's +OK
    // (ioredis's monitor() rejected then, in about one start in a few hundred).
    const flood = (async () => {
      while (!stop) await Promise.all(Array.from({ length: 20 }, () => busy.info('server')));
    })();
    for (let i = 0; i < 100; i++) {
      const watch = await watchServer(server.url);
      const seen = await watch.during(() => busy.set(`k${i}`, String(i)));
      expect(seen.filter((s) => s.args[0] === 'set')).toEqual([
        { args: ['set', `k${i}`, String(i)], source: expect.stringMatching(/^127\.0\.0\.1:\d+$/) },
      ]);
      await watch.stop();
    }
    stop = true;
    await flood;
  });

  it('authenticates when the URL carries a password', async () => {
    const server = await startRedisServer({ args: ['--requirepass', 'monitor-secret'] });
    onTestFinished(() => server.stop());
    const url = server.url.replace('redis://', 'redis://:monitor-secret@');
    const watch = await watchServer(url);
    onTestFinished(() => watch.stop());
    const client = new Redis(url);
    onTestFinished(() => client.disconnect());
    await client.ping();
    expect((await watch.during(() => client.get('x'))).map((s) => s.args)).toEqual([['get', 'x']]);
  });
});
