import { mkdirSync } from 'node:fs';
import { chromium, type Browser, type Route } from 'playwright-core';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, until } from '../support/processes.js';
import { API_KEY, startSystem } from '../support/system.js';
import { cleanUp } from '@cq/test-harness';

/** Screenshots are test artifacts: written here, never committed (see .gitignore). */
const ARTIFACTS = `${ROOT}test/test-artifacts`;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

describe('the dashboard in a real browser', async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const system = await startSystem({ workerEnv: { SESSION_GRACE_MS: '1000' } });
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
    ],
  });
  cleanUp(() => browser.close());

  it('refuses a visitor without credentials', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    // Challenged without credentials to offer, headless Chromium abandons the navigation.
    await expect(page.goto(`${system.api.baseUrl}/dashboard`)).rejects.toThrow(/ERR_INVALID_AUTH_CREDENTIALS/);
    const response = await context.request.get(`${system.api.baseUrl}/dashboard`);
    expect(response.status()).toBe(401);
    expect(response.headers()['www-authenticate']).toMatch(/^Basic realm=/);
    await context.close();
  });

  it('shows alice running with her fence and worker host, then in history as stopped, and the spawn queue in bull-board', async () => {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: API_KEY },
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));

    const admitted = await system.client.spawn((await system.client.issueToken({ userId: 'alice' })).token);
    await until(async () => (await system.client.findSession('alice'))?.state === 'running', 10_000, 'alice running');

    await page.goto(`${system.api.baseUrl}/dashboard`);
    const live = page.locator('#live tbody tr[data-user="alice"]');
    await live.locator('td.state', { hasText: 'running' }).waitFor({ timeout: 10_000 });
    expect(await live.locator('td.fence').textContent()).toBe(String(admitted.fence));
    expect(await live.locator('td.worker').textContent()).toBe('host-1');
    await page.locator('#workers tbody tr[data-worker="host-1"]').waitFor({ timeout: 10_000 });
    // The host's containment, as it gave it (which one depends on what this machine allows).
    expect(await page.locator('#workers tbody tr[data-worker="host-1"] td.containment').textContent()).toMatch(
      /^(namespace|group)$/,
    );
    // Its isolation in words, as it gave it: marked where it leaves the network or the files open.
    const isolation = page.locator('#workers tbody tr[data-worker="host-1"] td.isolation');
    const words = (await isolation.textContent()) ?? '';
    expect(words).toMatch(
      /^network (none|egress|host) · files (private|shared) · (no CPU cap|[\d.]+ CPUs?)( \(not isolated: .+\))?$/,
    );
    expect(await isolation.evaluate((td) => td.classList.contains('not-isolated'))).toBe(
      words.includes('not isolated'),
    );
    // Session events as they happen, in the page's live list (over the event stream, not the poll).
    await page.locator('#events-state', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await system.client.spawn(
      (
        await system.client.issueToken({
          userId: 'bob',
          metadata: { readyAfterMs: 100, endpoint: 'http://10.0.0.9:8888/lab', durationMs: 400 },
        })
      ).token,
    );
    const bob = (type: string) => page.locator(`#events tbody tr[data-user="bob"][data-type="${type}"]`);
    await bob('completed').waitFor({ timeout: 10_000 });
    for (const type of ['pending', 'running', 'ready']) expect(await bob(type).count()).toBe(1);
    expect(await bob('ready').locator('td.detail').textContent()).toBe('http://10.0.0.9:8888/lab');
    expect(await bob('completed').locator('td.detail').textContent()).toBe('exit 0');
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-running.png`, fullPage: true });

    // Drained while alice runs: the host is marked draining and its free slots leave the capacity.
    await system.client.drainHost('host-1');
    await page
      .locator('#workers tbody tr[data-worker="host-1"] td.state', { hasText: 'draining' })
      .waitFor({ timeout: 10_000 });
    await page.locator('#free-slots', { hasText: /^0$/ }).waitFor({ timeout: 10_000 });

    await system.client.stopSession('alice');
    const ended = page.locator('#ended tbody tr[data-user="alice"]');
    await ended.locator('td.state', { hasText: 'stopped' }).waitFor({ timeout: 10_000 });
    await live.waitFor({ state: 'detached', timeout: 10_000 });
    expect(await ended.first().locator('td.fence').textContent()).toBe(String(admitted.fence));
    await page.locator('#events tbody tr[data-user="alice"][data-type="stopped"]').waitFor({ timeout: 10_000 });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-stopped.png`, fullPage: true });

    await page.goto(`${system.api.baseUrl}/dashboard/queues`);
    await page.getByText('spawn', { exact: true }).first().click({ timeout: 15_000 });
    await page.waitForURL(/\/dashboard\/queues\/queue\/spawn/, { timeout: 15_000 });
    await page
      .getByText(/completed/i)
      .first()
      .waitFor({ timeout: 15_000 });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-queues.png`, fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('works when opened with the credentials in its address (http://user:KEY@host/dashboard)', async () => {
    // No credentials of the context's own: the browser has only those in the address.
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    const withCredentials = system.api.baseUrl.replace('http://', `http://operator:${API_KEY}@`);
    await page.goto(`${withCredentials}/dashboard`);
    await page.locator('#updated', { hasText: 'updated' }).waitFor({ timeout: 10_000 });
    // The state read: alice, stopped by the test before.
    await page
      .locator('#ended tbody tr[data-user="alice"] td.state', { hasText: 'stopped' })
      .waitFor({ timeout: 10_000 });
    // The event stream opened, with the events from before the page.
    await page.locator('#events-state', { hasText: 'live' }).waitFor({ timeout: 10_000 });
    await page.locator('#events tbody tr[data-user="alice"][data-type="stopped"]').waitFor({ timeout: 10_000 });
    // The webhooks table was read too (none here), and no request was refused on the way.
    await page.locator('#webhooks-state', { hasText: 'none' }).waitFor({ timeout: 10_000 });
    expect(await page.locator('#banner').isVisible()).toBe(false);
    expect(errors).toEqual([]);
    await context.close();
  });

  it("the banner says whose failure it is: the API's error answer, or the browser that could not reach the API", async () => {
    // An API process of this test's own, to be stopped while the page is open.
    const own = await system.addApi();
    onTestFinished(async () => void (await own.stop()));
    const context = await browser.newContext({ httpCredentials: { username: 'operator', password: API_KEY } });
    const page = await context.newPage();
    await page.goto(`${own.baseUrl}/dashboard`);
    // Its first state, from a process just started: beside the heaviest system test (ten API processes,
    // twenty sessions a second, in the other lane of npm test) that took more than 10 s once in CI. What
    // this test claims is what the banner says, not how soon a new process answers: a wide bound.
    await page.locator('#updated', { hasText: 'updated' }).waitFor({ timeout: 30_000 });
    const banner = page.locator('#banner');

    // A filter over the state route's 128 characters: the API answers 400, and the banner says so.
    await page.locator('#filter').fill('x'.repeat(200));
    await page.locator('#banner[data-cause="api"]').waitFor({ state: 'visible', timeout: 10_000 });
    expect(await banner.textContent()).toMatch(/^the API answered with an error: .*\(HTTP 400\)/);
    expect(await banner.textContent()).not.toContain('Redis');
    await page.locator('#filter').fill('');
    await banner.waitFor({ state: 'hidden', timeout: 10_000 });

    // The API gone: the page's fetch throws, and the banner blames neither Redis nor an API answer.
    await own.stop();
    await page.locator('#banner[data-cause="browser"]').waitFor({ state: 'visible', timeout: 15_000 });
    expect(await banner.textContent()).toMatch(/^the browser could not reach the API \(.+\); showing data from /);
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-api-gone.png`, fullPage: true });
    await context.close();
  });

  it("shows a banner while Redis is unreachable, frozen or killed, from the API's readiness without waiting for a refresh", async () => {
    const { startRedisServer } = await import('@cq/test-harness');
    const server = await startRedisServer();
    onTestFinished(() => server.stop());
    const own = await startSystem({ workers: 0, redisUrl: server.url });
    const context = await browser.newContext({ httpCredentials: { username: 'operator', password: API_KEY } });
    const page = await context.newPage();
    await page.goto(`${own.api.baseUrl}/dashboard`);
    await page.locator('#updated', { hasText: 'updated' }).waitFor({ timeout: 10_000 });

    // Frozen (its connections open, nothing answered), and every state refresh held by the test from
    // then on: the banner can only come from the page's readiness watch, as soon as the API says 503.
    const held: Route[] = [];
    await page.route('**/dashboard/api/state**', (route) => void held.push(route));
    const pid = server.pid()!;
    process.kill(pid, 'SIGSTOP');
    onTestFinished(() => {
      if (server.pid() === pid) process.kill(pid, 'SIGCONT');
    });
    await page.locator('#banner[data-cause="redis"]').waitFor({ state: 'visible', timeout: 10_000 });
    expect(await page.locator('#banner').textContent()).toMatch(/^Redis is unreachable: the API says /);
    process.kill(pid, 'SIGCONT');
    await page.unroute('**/dashboard/api/state**');
    await Promise.all(held.map((route) => route.continue()));
    await page.locator('#banner').waitFor({ state: 'hidden', timeout: 15_000 });

    await server.halt('SIGKILL');
    await page.locator('#banner', { hasText: 'Redis is unreachable' }).waitFor({ state: 'visible', timeout: 10_000 });
    expect(await page.locator('#banner').isVisible()).toBe(true);
    // The API's 503 unavailable, told apart from an API error or a failed request.
    expect(await page.locator('#banner').getAttribute('data-cause')).toBe('redis');
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-redis-down.png`, fullPage: true });
    await server.resume();
    await page.locator('#banner').waitFor({ state: 'hidden', timeout: 15_000 });
    await context.close();
  });
});
