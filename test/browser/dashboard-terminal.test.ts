// The functions given to page.evaluate and friends run in the page: they are typed against the DOM.
/// <reference lib="dom" />
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { cleanUp } from '@cq/test-harness';
import { ROOT, until } from '../support/processes.js';
import { startSystem } from '../support/system.js';

// A terminal on a running session from the dashboard (issue 47, item 5), in Chromium: xterm.js served by
// the API, over the dashboard's exec WebSocket, for a key with dashboard:act and sessions:exec.
const ARTIFACTS = `${ROOT}test/test-artifacts`;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const PROXY_SECRET = randomBytes(32).toString('hex');
const OPS_KEY = 'dashboard-terminal-ops-0123456789';
const NO_EXEC_KEY = 'dashboard-terminal-noexec-0123456789';

describe('the dashboard’s terminal', async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const keysFile = join(mkdtempSync(join(tmpdir(), 'cq-keys-')), 'keys.json');
  writeFileSync(
    keysFile,
    JSON.stringify([
      { name: 'ops', key: OPS_KEY, scopes: ['dashboard', 'dashboard:act', 'sessions:read', 'sessions:exec'] },
      { name: 'noexec', key: NO_EXEC_KEY, scopes: ['dashboard', 'dashboard:act', 'sessions:read', 'sessions:write'] },
    ]),
  );
  const system = await startSystem({
    workers: 0,
    apiEnv: { API_KEYS_FILE: keysFile, PROXY_SECRET },
    workerEnv: { PROXY_SECRET, SESSION_COMMAND: 'exec sleep 100000' },
  });
  await system.addWorker('host-terminal');
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-quic'],
  });
  cleanUp(() => browser.close());
  const { sessionId } = await system.client.spawn((await system.client.issueToken({ userId: 'dash-term' })).token);
  await until(async () => (await system.client.findSession('dash-term'))?.state === 'running', 15_000, 'running');

  it('typing echo hi shows hi; the audit line names the operator’s key; ending the shell shows its exit code', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'op', password: OPS_KEY } });
    cleanUp(() => context.close());
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    // What the page's policy refused (the browser says so on the console), and any resource of ours missing.
    page.on('console', (m) => {
      if (m.type() === 'error' && /Content Security Policy|Refused to/.test(m.text())) errors.push(m.text());
    });
    page.on('response', (r) => {
      if (r.status() >= 400) errors.push(`${r.status()} ${r.url()}`);
    });
    await page.goto(`${system.api.baseUrl}/dashboard`);
    const row = page.locator('#live tbody tr[data-user="dash-term"]');
    await row.locator('button[data-action="terminal"]').click();
    await page.locator('#terminal-state', { hasText: 'connected' }).waitFor({ timeout: 10_000 });
    // The shell's prompt first (# as root): keys typed before it are echoed by the terminal ahead of
    // the prompt, and the output then shares the prompt's row ("# hi"), as CI once saw.
    await until(
      async () => (await page.locator('.xterm-rows > div').allTextContents()).some((line) => line.trim() === '#'),
      10_000,
      'the prompt',
    );
    await page.locator('.xterm-helper-textarea').focus();
    await page.keyboard.type('echo hi');
    await page.keyboard.press('Enter');
    // A row that is exactly "hi": the command's output, not the echoed keys ("echo hi").
    await until(
      async () => (await page.locator('.xterm-rows > div').allTextContents()).some((line) => line.trim() === 'hi'),
      10_000,
      'hi in the terminal',
    ).catch(async (err: Error) => {
      // What the page showed: its picture, the terminal's rows and where the terminal was.
      await page.screenshot({ path: `${ARTIFACTS}/dashboard-terminal-failed.png`, fullPage: true });
      const rows = (await page.locator('.xterm-rows > div').allTextContents()).map((l) => l.trimEnd());
      const box = await page.locator('#terminal-screen').boundingBox();
      throw new Error(`${err.message}; the terminal at ${JSON.stringify(box)}, its rows: ${JSON.stringify(rows)}`);
    });
    await page.screenshot({ path: `${ARTIFACTS}/dashboard-terminal.png` });
    // The terminal fits its panel: the session's terminal has the rows the page draws, and its columns
    // follow the panel's width when the window's changes (at 900 px the output panel goes below the
    // tables, wider): a resize the session is told.
    const sizeInSession = async (mark: string): Promise<{ rows: number; cols: number }> => {
      await page.keyboard.type(`echo ${mark} $(stty size)`);
      await page.keyboard.press('Enter');
      let size: { rows: number; cols: number } | undefined;
      await until(
        async () => {
          for (const line of await page.locator('.xterm-rows > div').allTextContents()) {
            const m = new RegExp(`^${mark} (\\d+) (\\d+)$`).exec(line.trim());
            if (m) size = { rows: Number(m[1]), cols: Number(m[2]) };
          }
          return size !== undefined;
        },
        10_000,
        `${mark}'s stty size in the terminal`,
      );
      return size!;
    };
    const before = await sizeInSession('before');
    expect(before.rows).toBe(await page.locator('.xterm-rows > div').count());
    await page.setViewportSize({ width: 900, height: 720 });
    // stty size is asked again until the session's terminal has the new width (the resize travels
    // through the page, the API and the host).
    let after = before;
    for (let i = 0; after.cols === before.cols; i++) {
      expect(i, 'the session told the new width').toBeLessThan(50);
      after = await sizeInSession(`after${i}`);
    }
    expect(after.cols).toBeGreaterThan(before.cols);
    expect(after.rows).toBe(before.rows);
    expect(
      system.api.logs.some(
        (l) =>
          l['audit'] === true && l['action'] === 'session.exec' && l['key'] === 'ops' && l['sessionId'] === sessionId,
      ),
    ).toBe(true);
    await page.keyboard.type('exit 3');
    await page.keyboard.press('Enter');
    await page.locator('#terminal-state', { hasText: 'ended: exit code 3' }).waitFor({ timeout: 10_000 });
    // The CSP let xterm.js run and style itself: nothing was refused.
    expect(errors).toEqual([]);
  });

  it('a key without sessions:exec sees no Terminal button and is refused 403; another origin and no token are refused', async () => {
    const context = await browser.newContext({ httpCredentials: { username: 'op', password: NO_EXEC_KEY } });
    cleanUp(() => context.close());
    const page = await context.newPage();
    await page.goto(`${system.api.baseUrl}/dashboard`);
    const row = page.locator('#live tbody tr[data-user="dash-term"]');
    await row.locator('button[data-action="stop"]').waitFor();
    expect(await row.locator('button[data-action="terminal"]').count()).toBe(0);
    const statusOf = (key: string, query: string, origin: string): Promise<number> =>
      new Promise((resolve) => {
        const url = `${system.api.baseUrl.replace('http', 'ws')}/dashboard/api/terminal?sessionId=${sessionId}&${query}`;
        const ws = new WebSocket(url, ['v5.channel.k8s.io'], {
          headers: { authorization: `Basic ${Buffer.from(`op:${key}`).toString('base64')}`, origin },
        });
        ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.once('open', () => {
          ws.terminate();
          resolve(101);
        });
        ws.once('error', () => {});
      });
    const own = new URL(system.api.baseUrl).origin;
    expect(await statusOf(NO_EXEC_KEY, 'token=x', own)).toBe(403);
    const me = (await (
      await fetch(`${system.api.baseUrl}/dashboard/api/me`, {
        headers: { authorization: `Basic ${Buffer.from(`op:${OPS_KEY}`).toString('base64')}` },
      })
    ).json()) as { antiForgeryToken: string };
    expect(await statusOf(OPS_KEY, `token=${me.antiForgeryToken}`, 'http://evil.example')).toBe(403);
    expect(await statusOf(OPS_KEY, 'token=not-the-token', own)).toBe(403);
    expect(await statusOf(OPS_KEY, `token=${me.antiForgeryToken}`, own)).toBe(101);
  });
});
