// The functions given to page.evaluate and friends run in the page: they are typed against the DOM.
/// <reference lib="dom" />
import { mkdirSync } from 'node:fs';
import type { StreamedEvent } from '@cq/client';
import { Coordinator } from '@cq/coordinator';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { describe, expect, it, onTestFinished } from 'vitest';
import { ROOT, until } from '../support/processes.js';
import { API_KEY, sessionProgram, startSystem } from '../support/system.js';
import { startReceiver } from '../support/webhook-receiver.js';
import { cleanUp } from '@cq/test-harness';

/** Screenshots are test artifacts: written here, never committed (see .gitignore). */
const ARTIFACTS = `${ROOT}test/test-artifacts`;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** Sessions that print alternately to stdout and stderr, then exit 0 (test/support/output-session.mjs). */
const OUTPUT_SESSION = `exec ${process.execPath} ${sessionProgram('output-session.mjs')}`;

describe('the dashboard: events on opening, the chart, a session output, the webhooks', async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  // Private webhook URLs allowed: the last test's receiver listens on 127.0.0.1.
  const system = await startSystem({ workers: 0, apiEnv: { WEBHOOK_ALLOW_PRIVATE: 'true' } });
  await system.addWorker('host-1', { SESSION_COMMAND: OUTPUT_SESSION, SLOTS: '20' });
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

  // Every event of the system, from before the first session: what the page's table must match.
  const seen: Array<Exclude<StreamedEvent, { type: 'error' }>> = [];
  const reference = new AbortController();
  cleanUp(() => reference.abort());
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  void (async () => {
    for await (const event of system.client.events({ signal: reference.signal, onOpen: opened }))
      if (event.type !== 'error') seen.push(event);
  })();
  await open;

  async function openPage(): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: API_KEY },
      viewport: { width: 1280, height: 900 },
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${system.api.baseUrl}/dashboard`);
    return { context, page, errors };
  }

  it('the live events table shows the newest 50 events that happened before the page opened', async () => {
    // 18 sessions run and complete: pending, running, completed each, 54 events in all.
    const users = Array.from({ length: 18 }, (_, i) => `before-${String(i).padStart(2, '0')}`);
    const spawned = await Promise.all(
      users.map(async (userId) =>
        system.client.spawn((await system.client.issueToken({ userId, metadata: { lines: 1, intervalMs: 0 } })).token),
      ),
    );
    await Promise.all(spawned.map((s) => system.ended(s.userId, s.sessionId)));
    await until(() => Promise.resolve(seen.length >= 54), 10_000, 'the 54 events seen by the reference reader');
    expect(seen).toHaveLength(54);
    const newest = seen
      .slice(-50)
      .reverse()
      .map((e) => `${e.userId} ${e.type} ${e.fence}`);

    const { context, page, errors } = await openPage();
    const rows = page.locator('#events tbody tr');
    // Nothing happens after the page opened: these rows can only be the events from before.
    await page.waitForFunction(() => document.querySelectorAll('#events tbody tr').length === 50, undefined, {
      timeout: 10_000,
    });
    const shown = await rows.evaluateAll((trs) =>
      trs.map((tr) => {
        const cells = Array.from(tr.querySelectorAll('td'), (td) => td.textContent);
        return `${cells[1]} ${cells[2]} ${cells[3]}`;
      }),
    );
    expect(shown).toEqual(newest);
    expect(seen).toHaveLength(54);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('the admissions chart spans its row, under the counters, with a legend that can be read', async () => {
    const { context, page, errors } = await openPage();
    // The 18 admissions of the test before, once the API has flushed its counts and the page read them.
    await page.locator('#legend li[data-series="admitted"] .n', { hasText: /^18$/ }).waitFor({ timeout: 15_000 });
    const box = async (selector: string) => {
      const found = await page.locator(selector).boundingBox();
      if (found === null) throw new Error(`${selector} is not shown`);
      return found;
    };
    const row = await box('section.cards');
    const card = await box('#chart-card');
    const chart = await box('#chart');
    const counters = await Promise.all(
      ['#live-count', '#worker-count', '#slot-count', '#free-slots'].map((id) =>
        page.locator('.card', { has: page.locator(id) }).boundingBox(),
      ),
    );
    // Its own row, below the counters, and most of the row's width.
    for (const counter of counters) expect(card.y).toBeGreaterThanOrEqual(counter!.y + counter!.height);
    expect(card.width).toBeGreaterThan(row.width * 0.95);
    expect(chart.width).toBeGreaterThan(row.width * 0.9);
    expect(chart.height).toBeGreaterThanOrEqual(100);
    expect(await page.locator('#chart rect.admitted').count()).toBeGreaterThan(0);

    const items = page.locator('#legend li');
    expect((await items.allTextContents()).map((text) => text.replace(/\s+/g, ' ').trim())).toEqual([
      'admitted 18',
      expect.stringMatching(/^throttled \(spawn\) \d+$/),
      expect.stringMatching(/^refused \(token, session\) \d+$/),
      expect.stringMatching(/^no capacity \d+$/),
      expect.stringMatching(/^throttled \(tokens\) \d+$/),
    ]);
    const legend = await items.evaluateAll((lis) =>
      lis.map((li) => {
        const r = li.getBoundingClientRect();
        const style = getComputedStyle(li);
        const swatch = li.querySelector('.sw')!.getBoundingClientRect();
        return {
          x: r.x,
          y: r.y,
          width: r.width,
          height: r.height,
          fontSize: parseFloat(style.fontSize),
          swatch: swatch.width,
        };
      }),
    );
    for (const item of legend) {
      expect(item.fontSize).toBeGreaterThanOrEqual(12);
      expect(item.swatch).toBeGreaterThanOrEqual(10);
      // One line each: an item never breaks inside.
      expect(item.height).toBeLessThan(item.fontSize * 2);
      // Inside the card.
      expect(item.x).toBeGreaterThanOrEqual(card.x);
      expect(item.x + item.width).toBeLessThanOrEqual(card.x + card.width);
      expect(item.y + item.height).toBeLessThanOrEqual(card.y + card.height);
    }
    // No two items overlap.
    for (let i = 0; i < legend.length; i++)
      for (let j = i + 1; j < legend.length; j++) {
        const a = legend[i]!;
        const b = legend[j]!;
        const apart = a.x + a.width <= b.x || b.x + b.width <= a.x || a.y + a.height <= b.y || b.y + b.height <= a.y;
        expect(apart, `legend items ${i} and ${j} overlap`).toBe(true);
      }
    const path = `${ARTIFACTS}/dashboard-views-opened.png`;
    await page.screenshot({ path, fullPage: true });
    console.info(`screenshot: ${path}`);
    expect(errors).toEqual([]);
    await context.close();
  });

  // Needs the logs route (GET /v1/users/{userId}/sessions/{sessionId}/logs, on main since 091d437): on a
  // tree without it the route answers 404, the panel says "no output kept", and this test fails at the
  // check named below.
  it("a selected session's output is shown beside the tables, stream and time marked, followed live until it ends", async () => {
    const { context, page, errors } = await openPage();
    const admitted = await system.client.spawn(
      (await system.client.issueToken({ userId: 'out-ann', metadata: { lines: 30, intervalMs: 400 } })).token,
    );
    const row = page.locator('#live tbody tr[data-user="out-ann"]');
    // The session prints for 12 s: the row shows it running well before it ends, however slow the page's refresh.
    await row.locator('td.state', { hasText: 'running' }).waitFor({ timeout: 10_000 });
    await row.click();
    expect(await row.getAttribute('aria-selected')).toBe('true');
    const state = page.locator('#output-state');
    await page.waitForFunction(() => !/reading…/.test(document.querySelector('#output-state')!.textContent ?? ''));
    const first = `${ARTIFACTS}/dashboard-views-output-selected.png`;
    await page.screenshot({ path: first, fullPage: true });
    console.info(`screenshot: ${first}`);
    expect(
      await state.getAttribute('data-state'),
      'the logs route answered 404 ("no output kept"): it is not on this branch yet, or kept nothing',
    ).not.toBe('gone');

    // Following: lines keep coming while it runs.
    const lines = page.locator('#output-lines .line');
    await lines.nth(3).waitFor({ timeout: 10_000 });
    const early = await lines.count();
    await lines.nth(early).waitFor({ timeout: 10_000 });
    expect(await page.locator('#output-error').isHidden()).toBe(true);

    // It ends: the panel has every line, in order, each with its stream and time, and says it ended.
    await state.filter({ hasText: /^completed · ended/ }).waitFor({ timeout: 25_000 });
    const expected = [
      ...Array.from({ length: 30 }, (_, n) => (n % 2 === 0 ? `stdout out ${n}` : `stderr err ${n}`)),
      'stdout done',
    ];
    const shown = await lines.evaluateAll((rows) =>
      rows.map((r) => ({
        stream: r.querySelector('.stream')!.textContent,
        text: r.querySelector('.text')!.textContent,
        at: r.querySelector('.at')!.textContent,
        color: getComputedStyle(r.querySelector('.text')!).color,
      })),
    );
    expect(shown.map((l) => `${l.stream} ${l.text}`)).toEqual(expected);
    for (const line of shown) expect(line.at).toMatch(/^\d{2}:\d{2}:\d{2}\.\d{3}$/);
    expect(shown[1]!.color).not.toBe(shown[0]!.color); // stderr stands out
    expect(await state.textContent()).toContain('31 lines');

    // Beside the tables, not below them.
    const panel = (await page.locator('#output').boundingBox())!;
    const tables = (await page.locator('.tables').boundingBox())!;
    expect(panel.x).toBeGreaterThanOrEqual(tables.x + tables.width);
    expect(panel.width).toBeGreaterThan(300);

    // The history agrees.
    const ended = await system.ended('out-ann', admitted.sessionId);
    expect(ended.state).toBe('completed');
    const path = `${ARTIFACTS}/dashboard-views-output.png`;
    await page.screenshot({ path, fullPage: true });
    console.info(`screenshot: ${path}`);
    expect(errors).toEqual([]);
    await context.close();
  });

  it('the live table filters by label, pool, state, host and user, through the session list', async () => {
    // Long sessions (output-session with many lines), with two labels, in two pools (one host each).
    await system.addWorker('host-other', { SESSION_COMMAND: OUTPUT_SESSION, SLOTS: '2', POOL: 'other' });
    const forever = { lines: 100_000, intervalMs: 1000 };
    for (let i = 0; i < 3; i++)
      await system.client.spawn(
        (await system.client.issueToken({ userId: `flt-a-${i}`, labels: { team: 'a' }, metadata: forever })).token,
      );
    await system.client.spawn(
      (await system.client.issueToken({ userId: 'flt-b-0', labels: { team: 'b' }, pool: 'other', metadata: forever }))
        .token,
    );
    const { context, page, errors } = await openPage();
    const users = async (): Promise<string[]> =>
      (
        await page
          .locator('#live tbody tr')
          .evaluateAll((rows) => rows.map((r) => (r as HTMLElement).dataset['user'] ?? ''))
      ).sort();
    const until = async (want: string[], what: string): Promise<void> =>
      void (await expect.poll(users, { timeout: 10_000, message: what }).toEqual(want));

    await page.locator('#f-label').fill('team=a');
    await until(['flt-a-0', 'flt-a-1', 'flt-a-2'], 'team=a');
    await page.locator('#f-label').fill('');
    await page.locator('#f-pool').fill('other');
    await until(['flt-b-0'], 'pool other');
    expect(await page.locator('#live tbody tr td.labels').first().textContent()).toBe('team=b');
    await page.locator('#f-pool').fill('');
    await page.locator('#filter').fill('flt-a-1');
    await until(['flt-a-1'], 'user flt-a-1');
    await page.locator('#filter').fill('');
    await page.locator('#f-state').selectOption('stopping');
    await until([], 'state stopping');
    await page.locator('#f-state').selectOption('');
    await page.locator('#f-host').fill('host-other');
    await until(['flt-b-0'], 'host host-other');
    const path = `${ARTIFACTS}/dashboard-views-filters.png`;
    await page.screenshot({ path, fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
    await system.client.stopSessions({ labels: { team: 'a' } });
    await system.client.stopSessions({ labels: { team: 'b' } });
  });

  it('the webhooks panel lists a created webhook, then its last delivery outcome, and never its secret', async () => {
    const receiver = await startReceiver({ '/down': () => 503 });
    onTestFinished(() => receiver.close());
    const { context, page, errors } = await openPage();
    const hook = await system.client.createWebhook(`${receiver.url}/hook`, ['completed']);
    const down = await system.client.createWebhook(`${receiver.url}/down`, ['completed']);
    const row = page.locator(`#webhooks tbody tr[data-webhook="${hook.id}"]`);
    // The page reads the webhooks with its state: at the latest on its 5 s poll.
    await row.waitFor({ timeout: 10_000 });
    const cells = async (): Promise<string[]> => row.locator('td').allTextContents();
    expect((await cells()).slice(0, 3)).toEqual([hook.id, `${receiver.url}/hook`, 'completed']);
    expect((await cells())[4]).toBe('no attempt yet');

    const admitted = await system.client.spawn(
      (await system.client.issueToken({ userId: 'hook-panel', metadata: { lines: 1, intervalMs: 0 } })).token,
    );
    await system.ended('hook-panel', admitted.sessionId);
    await row
      .locator('td.outcome', { hasText: /^delivered · HTTP 200 · completed \(attempt 1\)$/ })
      .waitFor({ timeout: 15_000 });
    const failing = page.locator(`#webhooks tbody tr[data-webhook="${down.id}"]`);
    await failing.locator('td.outcome', { hasText: /^retrying · HTTP 503 · completed/ }).waitFor({ timeout: 15_000 });
    expect(await failing.locator('td.next').textContent()).toMatch(/\(in \d/);
    const panel = (await page.locator('#webhooks').textContent()) ?? '';
    for (const secret of [hook.secret, down.secret]) expect(panel).not.toContain(secret.slice(6));
    const path = `${ARTIFACTS}/dashboard-views-webhooks.png`;
    await page.screenshot({ path, fullPage: true });
    console.info(`screenshot: ${path}`);
    for (const id of [hook.id, down.id]) await system.client.deleteWebhook(id);
    expect(errors).toEqual([]);
    await context.close();
  });

  it("the hosts table words each host's isolation, and marks a host that leaves its network or files open", async () => {
    // Heartbeats as hosts with these settings publish them (in a pool of their own, taken away after).
    const redis = system.connect();
    onTestFinished(() => void redis.disconnect());
    const coordinator = new Coordinator({ redis, keyPrefix: system.keyPrefix });
    const hosts = {
      'iso-closed': { network: 'none', filesystem: 'private', cpus: 0.5 },
      'iso-egress': { network: 'egress', filesystem: 'private', cpus: 2 },
      'iso-files': { network: 'none', filesystem: 'shared', cpus: null },
      'iso-open': { network: 'host', filesystem: 'shared', cpus: null },
    } as const;
    for (const [workerId, isolation] of Object.entries(hosts))
      await coordinator.workers.heartbeat(
        { workerId, slots: 1, busy: 0, startedAt: Date.now(), pool: 'iso', isolation },
        60_000,
      );
    onTestFinished(async () => {
      for (const workerId of Object.keys(hosts)) await coordinator.workers.withdraw(workerId, [], 'iso');
    });
    const { context, page, errors } = await openPage();
    const cell = (workerId: string) => page.locator(`#workers tbody tr[data-worker="${workerId}"] td.isolation`);
    await cell('iso-open').waitFor({ timeout: 10_000 });
    // Read in one go in the page, the cell found and read in the same task: the table is drawn anew on
    // every refresh, and a cell read in several steps may be replaced between them (a replaced, detached
    // cell has no computed style: CI once read its mark as '').
    const shown = (workerId: string) =>
      page.evaluate((id) => {
        const td = document.querySelector(`#workers tbody tr[data-worker="${id}"] td.isolation`)!;
        return {
          text: td.textContent,
          marked: td.classList.contains('not-isolated'),
          // What the eye sees besides the words: the mark before them, and the colour.
          mark: getComputedStyle(td, '::before').content,
          colour: getComputedStyle(td).color,
          title: td.getAttribute('title'),
        };
      }, workerId);
    const closed = await shown('iso-closed');
    expect(closed).toMatchObject({ text: 'network none · files private · 0.5 CPU', marked: false, title: null });
    expect(closed.mark).toMatch(/^(none|normal)$/);
    expect(await shown('iso-egress')).toMatchObject({
      text: 'network egress · files private · 2 CPUs',
      marked: false,
    });
    const files = await shown('iso-files');
    expect(files).toMatchObject({
      text: 'network none · files shared · no CPU cap (not isolated: files)',
      marked: true,
      title: "This host's sessions are not kept apart from it: they see the host's files.",
    });
    const open = await shown('iso-open');
    expect(open).toMatchObject({
      text: 'network host · files shared · no CPU cap (not isolated: network, files)',
      marked: true,
      title: "This host's sessions are not kept apart from it: they use the host's network and see the host's files.",
    });
    expect(open.mark).toContain('\u26a0');
    expect(open.colour).not.toBe(closed.colour);
    // The column sits under its heading.
    const headings = await page.locator('#workers thead th').allTextContents();
    const cells = await page.locator('#workers tbody tr[data-worker="iso-open"] td').allTextContents();
    expect(cells[headings.indexOf('Isolation')]).toBe(open.text);
    const path = `${ARTIFACTS}/dashboard-views-isolation.png`;
    await page.locator('#workers').screenshot({ path });
    console.info(`screenshot: ${path}`);
    expect(errors).toEqual([]);
    await context.close();
  });
});
