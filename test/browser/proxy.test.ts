// The functions given to page.evaluate and friends run in the page: they are typed against the DOM.
/// <reference lib="dom" />
import { randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { cleanUp } from '@cq/test-harness';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { connectTo } from '../support/proxy.js';
import { ROOT, until } from '../support/processes.js';
import { sessionProgram, startSystem } from '../support/system.js';

// The session proxy in a real browser (Chromium): a connect URL lands on the session's own origin with
// the token gone and the cookie HttpOnly, SameSite=Lax and host-only; the session's page, its script, its
// fetch and its WebSocket work there; and that page cannot read the dashboard or the API with the
// operator's credentials, signed in in the same browser. The dashboard's Open button opens it too.
const ARTIFACTS = `${ROOT}test/test-artifacts`;
const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';
const PROXY_SECRET = randomBytes(32).toString('hex');
const OPS_KEY = 'proxy-browser-ops-key-0123456789';

describe('the session proxy in a browser', async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  const keysFile = join(mkdtempSync(join(tmpdir(), 'cq-keys-')), 'keys.json');
  writeFileSync(
    keysFile,
    JSON.stringify([
      { name: 'ops', key: OPS_KEY, scopes: ['dashboard', 'dashboard:act', 'sessions:read', 'sessions:connect'] },
    ]),
  );
  const system = await startSystem({
    apiEnv: { PROXY_SECRET, API_KEYS_FILE: keysFile },
    workerEnv: { PROXY_SECRET, SESSION_COMMAND: `exec ${process.execPath} ${sessionProgram('proxy-session.mjs')}` },
  });
  const { client } = system;
  const { sessionId } = await client.spawn((await client.issueToken({ userId: 'browser-a' })).token);
  await until(async () => (await client.findSession('browser-a'))?.ready === true, 15_000, 'the session ready');
  cleanUp(() => client.stopSession('browser-a').catch(() => {}));
  const apiPort = new URL(system.api.baseUrl).port;
  const origin = `http://8080-${sessionId}.localhost:${apiPort}`;
  const browser: Browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--no-first-run', '--disable-quic'],
  });
  cleanUp(() => browser.close());

  /** A browser signed in to the dashboard (Basic credentials for the API's origin only, as a browser keeps them). */
  async function signedIn(): Promise<{ context: BrowserContext; errors: string[] }> {
    const context = await browser.newContext({
      httpCredentials: { username: 'operator', password: OPS_KEY, origin: system.api.baseUrl },
      viewport: { width: 1400, height: 1000 },
    });
    const errors: string[] = [];
    context.on('weberror', (e) => errors.push(e.error().message));
    return { context, errors };
  }
  const seenBy = (page: Page) =>
    page.waitForFunction(() => document.title !== 'loading', undefined, { timeout: 10_000 });

  it('a connect URL lands on the session’s origin without its token; the cookie is HttpOnly, SameSite=Lax, host-only; the page’s script, fetch and WebSocket work', async () => {
    const { context, errors } = await signedIn();
    const page = await context.newPage();
    const { url } = await connectTo(system.api.baseUrl, sessionId, {}, OPS_KEY);
    await page.goto(url);
    expect(page.url()).toBe(`${origin}/`);
    await seenBy(page);
    expect(await page.title()).toBe('fetch ok; ws ok');
    const cookies = await context.cookies(origin);
    expect(cookies).toHaveLength(1);
    expect(cookies[0]).toMatchObject({
      name: 'cq_proxy',
      domain: `8080-${sessionId}.localhost`,
      path: '/',
      httpOnly: true,
      sameSite: 'Lax',
      secure: false,
    });
    // Host-only: no other origin is sent it.
    expect(await context.cookies(`http://9090-${sessionId}.localhost:${apiPort}`)).toEqual([]);
    expect(await context.cookies(system.api.baseUrl)).toEqual([]);
    expect(await page.evaluate(() => document.cookie)).toBe('');
    await page.screenshot({ path: `${ARTIFACTS}/proxy-session-page.png` });
    expect(errors).toEqual([]);
    await context.close();
  });

  it('the session’s page cannot read the dashboard or the API with the operator’s credentials, signed in in the same browser', async () => {
    const { context } = await signedIn();
    const dashboard = await context.newPage();
    await dashboard.goto(`${system.api.baseUrl}/dashboard`);
    await expect.poll(() => dashboard.locator('#whoami').textContent()).toBe('signed in as ops');
    const page = await context.newPage();
    await page.goto((await connectTo(system.api.baseUrl, sessionId, {}, OPS_KEY)).url);
    await seenBy(page);
    const attempts = await page.evaluate(async (api) => {
      const out: string[] = [];
      for (const path of ['/dashboard/api/state', '/dashboard/api/me', '/v1/sessions', '/v1/whoami']) {
        try {
          const res = await fetch(api + path, { credentials: 'include' });
          out.push(`${path}: read ${res.status} ${(await res.text()).slice(0, 40)}`);
        } catch {
          out.push(`${path}: blocked`);
        }
      }
      return out;
    }, system.api.baseUrl);
    expect(attempts).toEqual([
      '/dashboard/api/state: blocked',
      '/dashboard/api/me: blocked',
      '/v1/sessions: blocked',
      '/v1/whoami: blocked',
    ]);
    await context.close();
  });

  it('the dashboard’s Open button opens the ready session’s port in a new tab, on its own origin', async () => {
    const { context, errors } = await signedIn();
    const page = await context.newPage();
    await page.goto(`${system.api.baseUrl}/dashboard`);
    const open = page.locator(`#live tbody tr[data-user="browser-a"] button[data-action="open"]`);
    await expect.poll(() => open.count(), { timeout: 10_000 }).toBe(1);
    const [tab] = await Promise.all([context.waitForEvent('page'), open.click()]);
    await tab.waitForURL(`${origin}/`);
    await seenBy(tab);
    expect(await tab.title()).toBe('fetch ok; ws ok');
    await expect
      .poll(() => page.locator('#action-state').textContent())
      .toBe('Opened port 8080 of the session of browser-a in a new tab.');
    expect(await tab.evaluate(() => window.opener)).toBeNull();
    expect(errors).toEqual([]);
    await context.close();
  });
});
