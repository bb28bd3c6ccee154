// The functions given to page.evaluate and friends run in the page: they are typed against the DOM.
/// <reference lib="dom" />
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { ROOT, until } from '../support/processes.js';
import { sessionProgram, startSystem } from '../support/system.js';
import { cleanUp } from '@cq/test-harness';

const ARTIFACTS = `${ROOT}test/test-artifacts`;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
/** Sessions that print a line a second for a day: they run until stopped. */
const OUTPUT_SESSION = `exec ${process.execPath} ${sessionProgram('output-session.mjs')}`;
const FOREVER = { lines: 100_000, intervalMs: 1000 };

const OPS_KEY = 'dashboard-ops-key-0123456789';
const VIEWER_KEY = 'dashboard-viewer-key-0123456789';

/** The scopes of the read-only `viewer` role that docs/http-api.md gives as its example: the test runs with them. */
function documentedViewerScopes(): string[] {
  const doc = readFileSync(`${ROOT}docs/http-api.md`, 'utf8');
  const example = /## Access: named, scoped keys[\s\S]*?```json\n([\s\S]*?)```/.exec(doc)![1]!;
  const entries = JSON.parse(example) as Array<{ name: string; scopes: string[] }>;
  return entries.find((entry) => entry.name === 'viewer')!.scopes;
}

describe('the dashboard acts: stop, lifetime, drain, stop what a filter matches', async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const keysFile = join(mkdtempSync(join(tmpdir(), 'cq-keys-')), 'keys.json');
  writeFileSync(
    keysFile,
    JSON.stringify([
      {
        name: 'ops',
        key: OPS_KEY,
        scopes: ['dashboard', 'dashboard:act', 'sessions:read', 'sessions:write', 'hosts:write'],
      },
      { name: 'viewer', key: VIEWER_KEY, scopes: documentedViewerScopes() },
    ]),
  );
  const system = await startSystem({ workers: 0, apiEnv: { API_KEYS_FILE: keysFile } });
  await system.addWorker('host-run', { SESSION_COMMAND: OUTPUT_SESSION, SLOTS: '10' });
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-quic'],
  });
  cleanUp(() => browser.close());

  async function openPage(
    key: string,
    width = 1400,
  ): Promise<{ context: BrowserContext; page: Page; errors: string[] }> {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: key },
      viewport: { width, height: 1000 },
    });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    await page.goto(`${system.api.baseUrl}/dashboard`);
    return { context, page, errors };
  }
  async function running(userId: string, labels?: Record<string, string>): Promise<string> {
    const { sessionId } = await system.client.spawn(
      (await system.client.issueToken({ userId, metadata: FOREVER, ...(labels === undefined ? {} : { labels }) }))
        .token,
    );
    await until(
      async () => (await system.client.findSession(userId))?.state === 'running',
      15_000,
      `${userId} running`,
    );
    return sessionId;
  }
  const row = (page: Page, userId: string) => page.locator(`#live tbody tr[data-user="${userId}"]`);

  it("an operator's key: each button acts, after a confirmation, and the page shows the outcome", async () => {
    const stopped = await running('act-stop');
    await running('act-life');
    const bulk = await Promise.all(['act-bulk-0', 'act-bulk-1', 'act-bulk-2'].map((u) => running(u, { team: 'bulk' })));
    await system.addWorker('host-drain', { SESSION_COMMAND: OUTPUT_SESSION, SLOTS: '1' });
    const draining = system.workers.at(-1)!;
    const { context, page, errors } = await openPage(OPS_KEY);
    await expect.poll(() => page.locator('#whoami').textContent()).toBe('signed in as ops');

    // Lifetime: 2 minutes from now.
    page.once('dialog', (dialog) => void dialog.accept('2'));
    await row(page, 'act-life').locator('button[data-action="lifetime"]').click();
    await expect.poll(() => page.locator('#action-state').textContent()).toMatch(/^Session of act-life: now ends at /);
    const deadline = Date.parse((await system.client.getSession('act-life')).deadline!);
    expect(deadline - Date.now()).toBeGreaterThan(100_000);
    expect(deadline - Date.now()).toBeLessThanOrEqual(120_000);

    // Stop one session.
    let asked = '';
    page.once('dialog', (dialog) => {
      asked = dialog.message();
      void dialog.accept();
    });
    await row(page, 'act-stop').locator('button[data-action="stop"]').click();
    expect((await system.ended('act-stop', stopped)).state).toBe('stopped');
    expect(asked).toBe(`Stop the session of act-stop (${stopped})?`);

    // Stop what a filter matches: the confirmation says how many.
    await page.locator('#f-label').fill('team=bulk');
    await expect.poll(() => row(page, 'act-bulk-0').count()).toBe(1);
    page.once('dialog', (dialog) => {
      asked = dialog.message();
      void dialog.accept();
    });
    await page.locator('#stop-matching').click();
    for (const [i, sessionId] of bulk.entries())
      expect((await system.ended(`act-bulk-${i}`, sessionId)).state).toBe('stopped');
    expect(asked).toBe('Stop 3 sessions matching label team=bulk?');
    await expect.poll(() => page.locator('#action-state').textContent()).toBe('Stopped 3 of 3 matching sessions.');

    // Drain a host: it takes no new sessions and, with none running, exits 0.
    page.once('dialog', (dialog) => void dialog.accept());
    await page.locator('#workers tbody tr[data-worker="host-drain"] button[data-action="drain"]').click();
    expect((await draining.exited()).code).toBe(0);
    await expect.poll(() => page.locator('#action-state').textContent()).toBe('host-drain is draining.');

    await page.screenshot({ path: `${ARTIFACTS}/dashboard-actions.png`, fullPage: true });
    expect(errors).toEqual([]);
    await context.close();
    await system.client.stopSession('act-life');
  });

  it('fits a 1280 px wide window and a 1920 one: every column and action of the tables shows whole, none under the output panel', async () => {
    await running('act-fit-a-rather-long-user-id', { team: 'machine-learning', tier: 'gold' });
    for (const width of [1280, 1920]) {
      const { context, page, errors } = await openPage(OPS_KEY, width);
      const fit = row(page, 'act-fit-a-rather-long-user-id');
      await expect.poll(() => fit.count()).toBe(1);
      await fit.click();
      await page.locator('#output-lines .line').first().waitFor({ timeout: 10_000 });
      await page.locator('#workers tbody button[data-action="drain"]').first().waitFor({ timeout: 10_000 });
      await page.screenshot({ path: `${ARTIFACTS}/dashboard-${width}.png`, fullPage: true });
      // Each header, cell and button: inside the window (no sideways scroll), its text not cut, and the
      // topmost thing across its width (not the output panel over any of it).
      const faults = await page.evaluate(() => {
        const found: string[] = [];
        const root = document.documentElement;
        if (root.scrollWidth > root.clientWidth) found.push(`the page scrolls sideways (${root.scrollWidth} px)`);
        const targets = document.querySelectorAll<HTMLElement>(
          '#live th, #live tbody tr:first-child td, #live tbody tr:first-child button, #workers th, #workers tbody button',
        );
        for (const el of Array.from(targets)) {
          const name = `${el.tagName.toLowerCase()} "${(el.textContent ?? '').trim().slice(0, 30)}"`;
          el.scrollIntoView({ block: 'center', inline: 'nearest' });
          const box = el.getBoundingClientRect();
          if (box.width === 0) continue; // a cell with nothing to show
          if (box.left < 0 || box.right > root.clientWidth) found.push(`${name} reaches past the window`);
          if (el.scrollWidth > el.clientWidth + 1) found.push(`${name} is cut (${el.scrollWidth} > ${el.clientWidth})`);
          // Its left edge, centre and right edge, halfway down: a part cut off by the panel fails too.
          for (const x of [box.left + 1, box.left + box.width / 2, box.right - 1]) {
            const top = document.elementFromPoint(x, box.top + box.height / 2);
            if (top === null || el === top || el.contains(top) || top.contains(el)) continue;
            found.push(`${name} is under ${top.tagName.toLowerCase()}#${top.id} at x ${Math.round(x)}`);
            break;
          }
        }
        return found;
      });
      expect(faults, `at ${width} px`).toEqual([]);
      expect(errors).toEqual([]);
      await context.close();
    }
    await system.client.stopSession('act-fit-a-rather-long-user-id');
  });

  it("the docs' viewer role sees sessions, a session's output and events, no action button, and is refused when it calls an action anyway", async () => {
    const sessionId = await running('act-viewer');
    const { context, page, errors } = await openPage(VIEWER_KEY);
    await expect.poll(() => page.locator('#whoami').textContent()).toBe('signed in as viewer');
    await expect.poll(() => row(page, 'act-viewer').count()).toBe(1);
    // Everything a read-only operator looks at shows: the session's output (not a banner), its events.
    await row(page, 'act-viewer').click();
    await page.locator('#output-lines .line').first().waitFor({ timeout: 10_000 });
    await page.locator('#events tbody tr', { hasText: 'act-viewer' }).first().waitFor({ timeout: 10_000 });
    expect(await page.locator('#banner').isVisible()).toBe(false);
    expect(await page.locator('#output-error').isHidden()).toBe(true);
    expect(await page.locator('button[data-action]').count()).toBe(0);
    expect(await page.locator('#stop-matching').isVisible()).toBe(false);
    expect(await page.locator('#live th.act').isVisible()).toBe(false);
    // The page's own request, token and all: refused for the key's scopes.
    const answer = await page.evaluate(
      async ([userId, id]) => {
        const me = await (await fetch('/dashboard/api/me')).json();
        const res = await fetch('/dashboard/api/actions/stop', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-xsrf-token': me.antiForgeryToken },
          body: JSON.stringify({ userId, sessionId: id }),
        });
        return { status: res.status, body: await res.json() };
      },
      ['act-viewer', sessionId] as const,
    );
    expect(answer.status).toBe(403);
    expect(answer.body.error.scope).toBe('dashboard:act');
    expect((await system.client.getSession('act-viewer')).state).toBe('running');
    expect(errors).toEqual([]);
    await context.close();
    await system.client.stopSession('act-viewer');
  });

  it("another site's page, opened in the operator's browser, cannot make the dashboard act", async () => {
    const sessionId = await running('act-forged');
    // The API's log lines from here on: the first test's own (legitimate) stops came before.
    const logsFrom = system.api.logs.length;
    const target = `${system.api.baseUrl}/dashboard/api/actions/stop`;
    const body = JSON.stringify({ userId: 'act-forged', sessionId });
    // Another origin (another port: the same site, so even SameSite cookies go along): a fetch with
    // credentials, then a form that posts JSON-looking text (neither needs a preflight).
    const evil = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><form id="f" method="POST" action="${target}" enctype="text/plain">
<input name='${body.slice(0, -1)}, "pad": "' value='"}'></form>
<script>
fetch(${JSON.stringify(target)}, { method: 'POST', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: ${JSON.stringify(body)} })
  .then((r) => r.status, (e) => 'failed: ' + e.message)
  .then((outcome) => { document.title = 'fetch: ' + outcome; });
</script>`);
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    cleanUp(() => new Promise<void>((resolve) => evil.close(() => resolve())));
    const { context, page } = await openPage(OPS_KEY);
    await expect.poll(() => page.locator('#whoami').textContent()).toBe('signed in as ops');
    await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    // The fetch's answer is not the page's to read (no CORS headers): it fails, whatever the status.
    await expect.poll(() => page.title()).toMatch(/^fetch: /);
    const [answer] = await Promise.all([
      page.waitForResponse(target),
      page.evaluate(() => (document.getElementById('f') as HTMLFormElement).submit()),
    ]);
    // The browser sent the operator's credentials with the form: the anti-forgery check refused it.
    expect(answer.status()).toBe(403);
    // What the API answered to each of the two, from its own request log (as its lines come in).
    const statuses = (): Array<number | undefined> => {
      const lines = system.api.logs.slice(logsFrom);
      const asked = new Set(
        lines
          .filter((l) => (l['req'] as { url?: string } | undefined)?.url === '/dashboard/api/actions/stop')
          .map((l) => l['reqId']),
      );
      return lines
        .filter((l) => l['msg'] === 'request completed' && asked.has(l['reqId']))
        .map((l) => (l['res'] as { statusCode?: number }).statusCode);
    };
    await expect.poll(() => statuses().length, { timeout: 5000 }).toBeGreaterThanOrEqual(2);
    for (const status of statuses()) expect([401, 403]).toContain(status);
    expect((await system.client.getSession('act-forged')).state).toBe('running');
    expect(system.api.logs.some((l) => l['action'] === 'session.stop' && l['target'] === 'act-forged')).toBe(false);
    await context.close();
    await system.client.stopSession('act-forged');
  });
});
