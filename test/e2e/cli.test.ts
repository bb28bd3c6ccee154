import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { cq, cqFirstLine, cqStarted } from '../support/cli.js';
import { allLines } from '../support/output.js';
import { until } from '../support/processes.js';
import { API_KEY, startSystem } from '../support/system.js';
import { signatureValid, startReceiver } from '../support/webhook-receiver.js';

describe('the cq command line', async () => {
  // WEBHOOK_ALLOW_PRIVATE: the webhooks test's receiver listens on 127.0.0.1.
  // A scoped key beside API_KEYS' (key-1): a culler that may read and stop sessions, nothing more.
  const keysDir = mkdtempSync(join(tmpdir(), 'cq-keys-'));
  const CULLER_KEY = 'cli-culler-key-0123456789';
  writeFileSync(
    join(keysDir, 'keys.json'),
    JSON.stringify([{ name: 'culler', key: CULLER_KEY, scopes: ['sessions:read', 'sessions:write'] }]),
  );
  const system = await startSystem({
    apiEnv: {
      SPAWN_INTERVAL_MS: '60000',
      SPAWN_BURST: '1',
      WEBHOOK_ALLOW_PRIVATE: 'true',
      API_KEYS_FILE: join(keysDir, 'keys.json'),
    },
  });
  const env = { CQ_API_URL: system.api.baseUrl, CQ_API_KEY: API_KEY };

  it('issues a token, spawns, shows status, follows the session with watch, and lists history', async () => {
    const token = await cq(['token', 'cli-ann', '--metadata', '{"durationMs":1500}'], env);
    expect(token.code).toBe(0);
    expect(token.stdout.trim()).toMatch(/^v1\./);
    const spawned = await cq(['spawn', token.stdout.trim(), '--json'], env);
    expect(spawned.code).toBe(0);
    expect(JSON.parse(spawned.stdout)).toMatchObject({ userId: 'cli-ann', fence: 1, state: 'pending' });
    const watched = await cq(['watch', 'cli-ann'], env);
    expect(watched.code).toBe(0);
    expect(watched.stdout).toContain('cli-ann: completed (exit code 0)');
    const history = await cq(['history', 'cli-ann', '--json'], env);
    expect(JSON.parse(history.stdout).sessions[0]).toMatchObject({ state: 'completed', exitCode: 0 });
  });

  it("logs prints the current session's output, else the latest one's; --follow prints new lines until the session ends", async () => {
    await cq(['spawn', '--user', 'cli-logs', '--metadata', '{"tickEveryMs":100,"durationMs":1500}'], env);
    const followed = await cq(['logs', 'cli-logs', '--follow'], env);
    expect(followed.code).toBe(0);
    const ticks = followed.stdout.split('\n').filter((l) => / out tick \d+ /.test(l));
    expect(ticks.length).toBeGreaterThan(5);
    expect(ticks[0]).toMatch(/^\d{4}-\d\d-\d\dT\S+Z out tick 0 /);
    // Ended now: the latest session's output, the same lines.
    const after = await cq(['logs', 'cli-logs'], env);
    expect(after.stdout.split('\n').filter((l) => / out tick \d+ /.test(l))).toEqual(ticks);
    const none = await cq(['logs', 'cli-nobody'], env);
    expect(none.code).toBe(5);
    expect(none.stderr).toContain('cli-nobody has no live or ended session');
  });

  it('spawn --user issues its token with the options token takes, and refuses one it does not take or a user for a token', async () => {
    // A host of a pool of its own: the session runs there only if --pool reached the token.
    await system.addWorker('host-ml', { POOL: 'ml' });
    const options = ['--pool', 'ml', '--label', 'team=ml', '--label', 'tier=x', '--ttl', '5000', '--idle', '540000'];
    options.push('--lifetime', '30000', '--metadata', '{"printLabels":true,"durationMs":60000}');
    const spawned = await cq(['spawn', '--user', 'cli-zed', ...options, '--json'], env);
    expect(spawned.code, spawned.stderr).toBe(0);
    const admitted = JSON.parse(spawned.stdout) as { sessionId: string; lifetimeMs: number };
    expect(admitted.lifetimeMs).toBe(30_000);
    await until(async () => (await system.client.findSession('cli-zed'))?.state === 'running', 10_000, 'running');
    expect(await system.client.getSession('cli-zed')).toMatchObject({
      sessionId: admitted.sessionId,
      pool: 'ml',
      workerId: 'host-ml',
      labels: { team: 'ml', tier: 'x' },
      idleTimeoutMs: 540_000,
    });
    // The session itself was given the labels, the pool and the metadata (printLabels).
    await until(
      async () =>
        (await allLines(system.client, 'cli-zed', admitted.sessionId)).some(
          (l) => l.line === 'labels {"team":"ml","tier":"x"} pool ml',
        ),
      10_000,
      "the session's labels line",
    );
    // ls names the user once, as the line about the session opens.
    expect((await cq(['ls', '--user', 'cli-zed'], env)).stdout).toMatch(
      new RegExp(
        `^cli-zed: running, fence 1, session ${admitted.sessionId}, on host-ml, .* {2}pool ml {2}team=ml tier=x\n1 live session\n$`,
      ),
    );
    await system.client.stopSession('cli-zed');

    const notTaken = await cq(['spawn', '--user', 'cli-zed2', '--follow'], env);
    expect(notTaken).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'cq: spawn does not take --follow; run cq --help\n',
    });
    const user = await cq(['spawn', 'cli-zed2'], env);
    expect(user).toMatchObject({
      code: 2,
      stdout: '',
      stderr: 'cq: "cli-zed2" is not a spawn token; to spawn for a user, use cq spawn --user cli-zed2; run cq --help\n',
    });
    expect(await system.client.findSession('cli-zed2')).toBeUndefined();
    expect(await system.client.history('cli-zed2')).toEqual([]);
  });

  it('ends quietly, exit 0, when its stdout is closed early: logs --follow, and logs of more lines than a pipe holds', async () => {
    const { sessionId } = await system.client.spawn(
      (await system.client.issueToken({ userId: 'cli-tail', metadata: { tickEveryMs: 50 } })).token,
    );
    const followed = await cqFirstLine(['logs', 'cli-tail', '--follow'], env);
    expect(followed).toEqual({
      line: expect.stringMatching(/^\S+Z out test session cli-tail fence 1 pid \d+$/),
      code: 0,
      stderr: '',
    });
    // It ended on its own, the session still running: on the closed pipe, not at the session's end.
    expect((await system.client.findSession('cli-tail'))?.sessionId).toBe(sessionId);
    await system.client.stopSession('cli-tail');

    // 1 + 5 x 1,489 lines of 44 bytes kept, about 540 kB as cq prints them: far more than the pipe and
    // the reader's first read take, so cq is still writing when the pipe closes.
    const flood = await system.client.spawn(
      (await system.client.issueToken({ userId: 'cli-flood', metadata: { floodBytes: 300_000 } })).token,
    );
    await until(
      async () => (await allLines(system.client, 'cli-flood', flood.sessionId)).length === 7446,
      30_000,
      'the whole flood kept',
    );
    const listed = await cqFirstLine(['logs', 'cli-flood'], env);
    expect(listed).toEqual({
      line: expect.stringMatching(/^\S+Z out test session cli-flood fence 1 pid \d+$/),
      code: 0,
      stderr: '',
    });
    await system.client.stopSession('cli-flood');
  });

  it('spawn --idle sets the idle timeout; status shows it; watch reports the idle end as stopped (idle), exit 12', async () => {
    expect((await cq(['spawn', '--user', 'cli-idle', '--idle', '1500'], env)).code).toBe(0);
    await until(async () => (await system.client.findSession('cli-idle'))?.state === 'running', 10_000, 'running');
    const status = await cq(['status', 'cli-idle'], env);
    expect(status.stdout).toMatch(/^cli-idle: running, .*last active .* ago, idle timeout 1\.5 s \(idle in /);
    const watched = await cq(['watch', 'cli-idle'], env);
    expect(watched.stdout).toMatch(/cli-idle: stopped \(idle\) \(exit code 143\)/);
    expect(watched.code).toBe(12);
    expect((await cq(['token', 'cli-idle', '--idle', 'soon'], env)).stderr).toContain('--idle must be a whole number');
  });

  it("extend changes the live session's lifetime; beyond the cap it says the largest allowed and exits 9", async () => {
    await cq(['spawn', '--user', 'cli-cal', '--metadata', '{"durationMs":60000}', '--lifetime', '60000'], env);
    const running = async () => (await system.client.findSession('cli-cal'))?.state === 'running';
    await until(running, 10_000, 'cli-cal running');
    const extended = await cq(['extend', 'cli-cal', '120000', '--json'], env);
    expect(extended.code).toBe(0);
    const session = JSON.parse(extended.stdout) as { deadline: string; state: string };
    expect(session.state).toBe('running');
    expect(Date.parse(session.deadline) - Date.now()).toBeGreaterThan(110_000);
    expect((await cq(['extend', 'cli-cal', '30000'], env)).stdout).toMatch(/^cli-cal: running, .*lifetime left/);
    const tooLong = await cq(['extend', 'cli-cal', '3600000'], env);
    expect(tooLong.code).toBe(9);
    expect(tooLong.stderr).toMatch(/^lifetime_too_long: lifetimeMs may be at most \d+ for this session now/);
    expect((await cq(['extend', 'cli-nobody', '1000'], env)).code).toBe(5);
    expect((await cq(['extend', 'cli-cal'], env)).code).toBe(2);
    expect((await cq(['extend', 'cli-cal', 'soon'], env)).stderr).toContain('whole number of milliseconds');
    await cq(['stop', 'cli-cal'], env);
  });

  it('whoami names the key and its scopes; a command the key has no scope for names the scope, exit 16, and changes nothing', async () => {
    expect((await cq(['whoami'], env)).stdout).toBe('key-1: admin\n');
    const culler = { ...env, CQ_API_KEY: CULLER_KEY };
    expect((await cq(['whoami'], culler)).stdout).toBe('culler: sessions:read, sessions:write\n');
    const refused = await cq(['drain', 'host-1'], culler);
    expect(refused.code).toBe(16);
    expect(refused.stderr).toBe(
      'forbidden: the key from CQ_API_KEY lacks the scope "hosts:write" this command needs: use a key that has ' +
        'it, or "admin" (cq whoami shows this key\'s name and scopes)\n',
    );
    expect((await system.client.hosts()).hosts.find((h) => h.workerId === 'host-1')?.state).toBe('active');
    const token = await cq(['token', 'cli-scoped'], culler);
    expect(token.code).toBe(16);
    expect(token.stderr).toContain('"tokens:write"');
  });

  it('says what went wrong in one line and exits with a code scripts can use', async () => {
    const none = await cq(['status', 'cli-nobody'], env);
    expect(none).toMatchObject({ code: 5, stderr: 'no_session: User cli-nobody has no live session.\n' });
    expect((await cq(['spawn', 'v1.Ym9i.' + 'A'.repeat(43)], env)).code).toBe(4);
    expect((await cq(['token', 'cli-ann'], { ...env, CQ_API_KEY: 'wrong-key-0123456789' })).code).toBe(3);
    await cq(['spawn', '--user', 'cli-bea', '--metadata', '{"durationMs":60000}'], env);
    const exists = await cq(['spawn', '--user', 'cli-bea'], env);
    expect(exists.code).toBe(6);
    await cq(['stop', 'cli-bea'], env);
    // Whether the session is still stopping or has just ended when watch first looks, it reports the stop.
    expect((await cq(['watch', 'cli-bea'], env)).code).toBe(12);
    const afterwards = await cq(['watch', 'cli-bea'], env);
    expect(afterwards.code).toBe(12);
    expect(afterwards.stdout).toMatch(/^cli-bea: stopped( \(exit code \d+\))?, session \S+ at \d{4}-/);
    const throttled = await cq(['spawn', '--user', 'cli-bea'], env);
    expect(throttled.code).toBe(7);
    expect(throttled.stderr).toMatch(/^throttled: retry in \d+ s\n$/);
    expect((await cq(['frobnicate'], env)).code).toBe(2);
    expect((await cq(['status'], env)).code).toBe(2);
    expect((await cq(['token', 'x', '--ttl', 'soon'], env)).stderr).toContain('--ttl must be a whole number');
    const down = await cq(['status', 'x'], { CQ_API_URL: 'http://127.0.0.1:1', CQ_API_KEY: API_KEY });
    expect(down.code).toBe(8);
  });

  it('watch of a user with no session yet waits for the next one, then follows it to its end', async () => {
    const watch = cqStarted(['watch', 'cli-later'], env);
    // Once it says so, its stream is open: nothing the session does from then on is missed.
    await until(() => watch.output.stderr.includes('waiting for the next one'), 10_000, 'watch waiting');
    expect(watch.output.stderr).toBe(
      'cq: cli-later has no live session; waiting for the next one (the stream is open)\n',
    );
    expect(watch.output.stdout).toBe('');
    const { token } = await system.client.issueToken({ userId: 'cli-later', metadata: { durationMs: 1000 } });
    const { sessionId } = await system.client.spawn(token);
    expect(await watch.exited).toBe(0);
    const lines = watch.output.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe(`cli-later: pending, fence 1, session ${sessionId}`);
    expect(lines).toContainEqual(
      expect.stringMatching(new RegExp(`^cli-later: running, fence 1, session ${sessionId}, on host-`)),
    );
    expect(lines.at(-1)).toBe(`cli-later: completed (exit code 0), session ${sessionId}`);
    // Now the user has an ended session and no live one: watch says how it ended, and stops.
    const again = await cq(['watch', 'cli-later'], env);
    expect(again.stdout).toMatch(
      new RegExp(`^cli-later: completed \\(exit code 0\\), session ${sessionId} at \\d{4}-`),
    );
    expect(again.code).toBe(0);
  });

  it("activity starts the session's idle clock again; --session for another session exits 9, no session 5", async () => {
    expect(
      (await cq(['spawn', '--user', 'cli-act', '--idle', '60000', '--metadata', '{"durationMs":60000}'], env)).code,
    ).toBe(0);
    await until(async () => (await system.client.findSession('cli-act'))?.state === 'running', 10_000, 'running');
    const before = await system.client.getSession('cli-act');
    const sent = Date.now();
    const recorded = await cq(['activity', 'cli-act'], env);
    expect(recorded).toMatchObject({
      code: 0,
      stdout: "cli-act: activity recorded; a running session's idle clock starts again\n",
    });
    const after = await system.client.getSession('cli-act');
    expect(Date.parse(after.lastActivityAt!)).toBeGreaterThan(Date.parse(before.lastActivityAt!));
    expect(Date.parse(after.lastActivityAt!)).toBeGreaterThanOrEqual(sent);
    const json = await cq(['activity', 'cli-act', '--session', before.sessionId, '--json'], env);
    expect(JSON.parse(json.stdout)).toEqual({ userId: 'cli-act', sessionId: before.sessionId, activity: 'recorded' });
    const other = await cq(['activity', 'cli-act', '--session', '00000000-0000-4000-8000-000000000000'], env);
    expect(other.code).toBe(9);
    expect(other.stderr).toMatch(/^session_mismatch: /);
    const none = await cq(['activity', 'cli-nobody'], env);
    expect(none).toMatchObject({ code: 5, stderr: 'no_session: User cli-nobody has no live session.\n' });
    await system.client.stopSession('cli-act');
  });

  it("stop --user stops that user's session; with another filter, --user is one of the bulk stop's filters", async () => {
    await cq(['spawn', '--user', 'cli-stop', '--metadata', '{"durationMs":60000}'], env);
    const live = await system.client.getSession('cli-stop');
    const stopped = await cq(['stop', '--user', 'cli-stop'], env);
    expect(stopped.code).toBe(0);
    expect(stopped.stdout).toMatch(new RegExp(`^cli-stop: (stopping|stopped), session ${live.sessionId}\n$`));
    expect((await cq(['watch', 'cli-stop'], env)).code).toBe(12);
    expect((await system.client.history('cli-stop'))[0]).toMatchObject({ sessionId: live.sessionId, state: 'stopped' });
    expect((await cq(['stop', '--user', 'cli-stop'], env)).code).toBe(5);

    const { token } = await system.client.issueToken({
      userId: 'cli-stop2',
      labels: { job: 'cli' },
      metadata: { durationMs: 60000 },
    });
    await system.client.spawn(token);
    expect((await cq(['stop', '--user', 'cli-stop2', '--label', 'job=other'], env)).stdout).toBe(
      '0 matched, 0 stopping or stopped\n',
    );
    expect(await system.client.findSession('cli-stop2')).toBeDefined();
    expect((await cq(['stop', '--user', 'cli-stop2', '--label', 'job=cli'], env)).stdout).toBe(
      '1 matched, 1 stopping or stopped\n',
    );
    expect((await cq(['watch', 'cli-stop2'], env)).code).toBe(12);
    expect((await cq(['stop', 'cli-stop2', '--user', 'cli-stop2'], env)).code).toBe(2);
  });

  it("labels changes the live session's labels; session shows a session by its id, live and then ended", async () => {
    const { token } = await system.client.issueToken({
      userId: 'cli-lab',
      labels: { job: 'cli' },
      metadata: { durationMs: 60000 },
    });
    const { sessionId } = await system.client.spawn(token);
    const labelled = await cq(['labels', 'cli-lab', 'team=a', 'job-'], env);
    expect(labelled).toMatchObject({ code: 0, stdout: `cli-lab: labels team=a, session ${sessionId}\n` });
    expect((await system.client.getSession('cli-lab')).labels).toEqual({ team: 'a' });
    const live = await cq(['session', sessionId], env);
    expect(live.stdout).toMatch(
      new RegExp(`^cli-lab: (pending|running), fence 1, session ${sessionId}.*, pool default, labels team=a\n$`),
    );
    await cq(['stop', 'cli-lab'], env);
    await until(async () => (await system.client.findSession('cli-lab')) === undefined, 10_000, 'cli-lab ended');
    const gone = await cq(['session', sessionId], env);
    expect(gone.stdout).toMatch(
      new RegExp(
        `^cli-lab: stopped( \\(exit code \\d+\\))?, session ${sessionId}, ended at \\S+, pool default, labels team=a\n$`,
      ),
    );
    expect((await cq(['session', '00000000-0000-4000-8000-000000000000'], env)).code).toBe(5);
  });

  it('events prints each session event of every user as it happens', async () => {
    const events = cqStarted(['events'], env);
    // Once it says its stream is open, a session spawned is seen from its start.
    const opened = 'cq: the event stream is open; each event prints as it happens (Ctrl-C stops)\n';
    await until(() => events.output.stderr === opened, 10_000, 'the events stream open');
    const { token } = await system.client.issueToken({ userId: 'cli-ev', metadata: { durationMs: 300 } });
    const { sessionId } = await system.client.spawn(token);
    const ending = `cli-ev: completed (exit code 0), fence 1, session ${sessionId}`;
    await until(() => events.output.stdout.includes(ending), 15_000, 'the completed event printed');
    events.stop();
    const mine = events.output.stdout.split('\n').filter((line) => line.includes(`session ${sessionId}`));
    expect(mine[0]).toMatch(new RegExp(`^\\d{4}-\\S+Z cli-ev: pending, fence 1, session ${sessionId}, pool default$`));
    expect(mine).toContainEqual(
      expect.stringMatching(/ cli-ev: running, fence 1, session \S+, on host-\d, pool default$/),
    );
    expect(mine.at(-1)).toMatch(new RegExp(` ${ending.replace(/[()]/g, '\\$&')}, on host-\\d, pool default$`));
    expect(events.output.stderr).toBe(opened);
  });

  it('webhooks: create prints the secret once, list never; deliveries shows the attempts; delete; 15 for an unknown id, 2 for a missing one', async () => {
    const receiver = await startReceiver();
    onTestFinished(() => receiver.close());
    const url = `${receiver.url}/cli`;
    const created = await cq(['webhooks', 'create', url, '--events', 'completed'], env);
    expect(created.code).toBe(0);
    const [, id, , secret] =
      /^(wh_\w+): (\S+) \(completed\)\nsecret: (whsec_\S+)\n\(shown only now/.exec(created.stdout) ?? [];
    expect(id, created.stdout).toBeDefined();
    expect(created.stdout).toContain(`${id}: ${url} (completed)`);

    const listed = await cq(['webhooks'], env);
    expect(listed.code).toBe(0);
    expect(listed.stdout).toMatch(/^ID +URL +EVENTS +CREATED\n/);
    expect(listed.stdout).toContain(id!);
    expect(listed.stdout).toContain(url);
    const json = await cq(['webhooks', 'list', '--json'], env);
    expect(JSON.parse(json.stdout)).toEqual({
      webhooks: [{ id, url, events: ['completed'], createdAt: expect.any(String) }],
    });
    for (const output of [listed.stdout, json.stdout]) expect(output).not.toContain(secret!.slice(6));

    // The secret printed is the one deliveries are signed with.
    await cq(['spawn', '--user', 'cli-hook', '--metadata', '{"durationMs":100}'], env);
    await until(() => receiver.at('/cli').length > 0, 15_000, 'the completed event delivered');
    expect(signatureValid(secret!, receiver.at('/cli')[0]!)).toBe(true);
    await until(
      async () => (await cq(['webhooks', 'deliveries', id!], env)).stdout.includes('completed'),
      10_000,
      'the attempt logged',
    );
    const deliveries = await cq(['webhooks', 'deliveries', id!], env);
    expect(deliveries.code).toBe(0);
    expect(deliveries.stdout).toMatch(
      /^AT +EVENT +TYPE +ATTEMPT +OUTCOME +NEXT ATTEMPT\n\S+ +\S+ +completed +1 +200 +-\n$/,
    );
    const logged = JSON.parse((await cq(['webhooks', 'deliveries', id!, '--json'], env)).stdout);
    expect(logged.deliveries).toEqual([
      {
        eventId: receiver.at('/cli')[0]!.headers['webhook-id'],
        type: 'completed',
        attempt: 1,
        status: 200,
        at: expect.any(String),
      },
    ]);

    const deleted = await cq(['webhooks', 'delete', id!], env);
    expect(deleted).toMatchObject({ code: 0, stdout: `${id}: deleted; its pending deliveries are dropped\n` });
    expect((await cq(['webhooks'], env)).stdout).toBe('no webhooks\n');
    for (const args of [
      ['webhooks', 'delete', id!],
      ['webhooks', 'deliveries', id!],
    ]) {
      const unknown = await cq(args, env);
      expect(unknown.code, args.join(' ')).toBe(15);
      expect(unknown.stderr).toMatch(/^no_webhook: /);
    }
    for (const [action, missing] of [
      ['create', 'a URL'],
      ['delete', 'a webhook id'],
      ['deliveries', 'a webhook id'],
    ]) {
      const usage = await cq(['webhooks', action!], env);
      expect(usage.code, action).toBe(2);
      expect(usage.stderr).toContain(`cq: webhooks ${action} needs ${missing}`);
    }
    expect((await cq(['webhooks', 'frob'], env)).code).toBe(2);
  });
});
