/**
 * The console in real Chromium against the real server, started here (support/server.ts): sign in
 * with the development key, generate a 4 s 480p video and watch it succeed and play without a
 * reload, cancel a queued task and get its price back, create and revoke a key, rotate the webhook
 * secret, sign out. Every page is checked with axe-core and screenshot at 1280×800 and 390×844
 * (test-results/screenshots/server-*.png).
 */
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, newPage, screenshot, seriousAxeViolations, signIn, skipBrowser, SKIP_REASON, type PageProblems } from './support/browser';
import { startServer, type RunningServer } from './support/server';

const KEY_STORAGE_ITEM = 'vidgen.console.apiKey';
/** A render of 4 s at 480p takes seconds; a busy two-core machine may take many more. */
const RENDER_TIMEOUT_MS = 90_000;

interface Task {
  requestId: string;
  status: string;
  creditsCharged: number;
  output: { url: string } | null;
}

/** axe-core on the page as it is now: no serious or critical violation, reported by page, rule and element. */
async function expectAccessible(page: Page, label: string): Promise<void> {
  const violations = await seriousAxeViolations(page);
  expect(violations.map((v) => `${label} (${page.url()}): ${v.id} [${v.impact}] ${v.help} at ${v.targets.join(', ')}`)).toEqual([]);
}

/** The digits of a text such as "99,980 credits" (any locale's grouping). */
function credits(text: string | null): number {
  const digits = (text ?? '').replace(/\D/g, '');
  if (!digits) throw new Error(`no number in ${JSON.stringify(text)}`);
  return Number(digits);
}

async function headerBalance(page: Page): Promise<number> {
  return credits(await page.getByTestId('header-balance').textContent());
}

/** Waits until the header's balance reads `expected`, and says what it read instead. */
async function expectHeaderBalance(page: Page, expected: number, timeout = 15_000): Promise<void> {
  try {
    await page.waitForFunction((want) => (document.querySelector('[data-testid=header-balance]')?.textContent ?? '').replace(/\D/g, '') === String(want), expected, {
      timeout,
    });
  } catch {
    throw new Error(`the header balance should read ${expected} credits; it reads ${JSON.stringify(await page.getByTestId('header-balance').textContent())}`);
  }
}

async function taskOf(server: RunningServer, requestId: string): Promise<Task> {
  const res = await server.api(`/video/generations/${requestId}`);
  expect(res.status).toBe(200);
  return (await res.json()) as Task;
}

/** The request id of the task page the browser is on. */
function taskIdFromUrl(page: Page): string {
  const match = /\/console\/tasks\/(gen_[0-9A-Za-z]+)$/.exec(new URL(page.url()).pathname);
  if (!match) throw new Error(`not on a task page: ${page.url()}`);
  return match[1]!;
}

/** Main-frame navigations (full loads and in-app route changes both count). */
function countNavigations(page: Page): { readonly count: number } {
  const counter = { count: 0 };
  page.on('framenavigated', (frame) => {
    if (frame === page.mainFrame()) counter.count++;
  });
  return counter;
}

/** Goes to a page of the console through its navigation (an in-app route change, as a user would). */
async function openFromNav(page: Page, name: string, heading: string | RegExp): Promise<void> {
  await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name, exact: true }).click();
  await page.getByRole('heading', { level: 1, name: heading }).waitFor();
}

/** Fills the generate form for a 4 s 480p video and submits it; returns the text of the page (with its price) as it was submitted. */
async function generate(page: Page, prompt: string): Promise<string> {
  await page.getByLabel('Prompt').fill(prompt);
  await page.getByLabel('Duration').selectOption('4');
  await page.getByLabel('Resolution').selectOption('480p');
  // The price of what is chosen, in credits, somewhere on the page (besides the header's balance).
  await expect.poll(async () => (await page.getByRole('main').textContent()) ?? '').toMatch(/\d[\d,. ]*\s*credits/);
  const mainText = (await page.getByRole('main').textContent()) ?? '';
  await page.getByRole('button', { name: 'Generate' }).click();
  await page.waitForURL(/\/console\/tasks\/gen_[0-9A-Za-z]+$/);
  return mainText;
}

/**
 * Records, in the page, every status word the task page's badge shows, in order (a
 * MutationObserver installed before the app's scripts run): what the user saw, not just the end.
 */
async function recordStatuses(page: Page): Promise<void> {
  await page.addInitScript(() => {
    const seen: string[] = [];
    (window as unknown as { __e2eStatuses: string[] }).__e2eStatuses = seen;
    const look = () => {
      const word = /\/tasks\/gen_/.test(location.pathname) ? document.querySelector('main .badge')?.textContent?.trim() : undefined;
      if (word && seen[seen.length - 1] !== word) seen.push(word);
    };
    new MutationObserver(look).observe(document, { subtree: true, childList: true, characterData: true });
  });
}

const statusesSeen = (page: Page) => page.evaluate(() => (window as unknown as { __e2eStatuses?: string[] }).__e2eStatuses ?? []);

function statusBadge(page: Page) {
  return page.getByRole('main').locator('.badge').first();
}

describe.skipIf(skipBrowser)('the console in Chromium against the real server', () => {
  let server: RunningServer;
  /** A server without a worker: what is submitted there stays queued. */
  let idle: RunningServer;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  /** The task generated (and succeeded) by the generate test, for the screenshots. */
  let succeededTaskId: string | undefined;

  async function open(viewport: 'desktop' | 'phone' = 'desktop'): Promise<{ page: Page; problems: PageProblems }> {
    const { context, page, problems } = await newPage(browser, viewport);
    contexts.push(context);
    return { page, problems };
  }

  beforeAll(async () => {
    // The main server is an api process on PostgreSQL: the generate test adds a worker process
    // beside it once the page shows the task queued, so the page is seen to follow the change.
    [server, idle, browser] = await Promise.all([startServer({ database: 'postgres', worker: false }), startServer({ worker: false }), launchChromium()]);
  });

  // Each test's pages go with it (their long polls included).
  afterEach(async () => {
    await Promise.all(contexts.splice(0).map((context) => context.close().catch(() => undefined)));
  });

  afterAll(async () => {
    await browser?.close();
    await Promise.all([server?.stop(), idle?.stop()]);
  });

  it('loads the console, whose sign-in form passes axe, and signs in with the development key', async () => {
    const { page, problems } = await open();
    await page.goto(server.consoleUrl);
    await page.getByLabel('API key').waitFor();
    await expectAccessible(page, 'sign-in');

    await signIn(page, server.consoleUrl, server.devKey);
    await page.getByRole('heading', { level: 1 }).waitFor();
    // Compared, not printed: a failure must not put the key in the test's output.
    expect((await page.evaluate((item) => sessionStorage.getItem(item), KEY_STORAGE_ITEM)) === server.devKey, 'sessionStorage holds the key').toBe(true);
    expect(page.url().includes(server.devKey), 'the key is in the URL').toBe(false);
    // The balance of the development account, as the API says it.
    const account = (await (await server.api('/account')).json()) as { balance: number };
    await expectHeaderBalance(page, account.balance);
    expect(problems.errors).toEqual([]);
  });

  it('generates a 4 s 480p video, watches it reach succeeded without a reload, and plays it', async () => {
    const { page, problems } = await open();
    const ranges: string[] = [];
    page.on('response', (response) => {
      if (new URL(response.url()).pathname.startsWith('/files/') && response.status() === 206) ranges.push(response.request().headers()['range'] ?? '');
    });
    await recordStatuses(page);
    await signIn(page, server.consoleUrl, server.devKey);
    await openFromNav(page, 'Generate', /generate/i);
    await expectAccessible(page, 'generate');

    // The price shown is the models endpoint's: credits per second × 4.
    const models = (await (await server.api('/models')).json()) as { data: { id: string; prices: { resolution: string; creditsPerSecond: number }[] }[] };
    const model = await page.getByLabel('Model').inputValue();
    const perSecond = models.data.find((m) => m.id === model)?.prices.find((p) => p.resolution === '480p')?.creditsPerSecond;
    expect(perSecond, `the models endpoint prices ${model} at 480p`).toBeGreaterThan(0);

    // A marker in the window: it survives only if the page is never reloaded.
    await page.evaluate(() => ((window as unknown as { __e2eMarker: string }).__e2eMarker = 'not reloaded'));
    const shown = await generate(page, 'A paper boat drifting down a rainy street, seen from above');
    expect(shown).toMatch(new RegExp(`(^|[^\\d,.])${perSecond! * 4}\\s*credits`));

    const requestId = taskIdFromUrl(page);
    const navigations = countNavigations(page);
    await page.getByRole('heading', { level: 1 }).waitFor();
    // Nothing renders yet: the page shows the task queued, for as long as the test likes.
    await statusBadge(page).filter({ hasText: /^queued$/ }).waitFor();
    await expectAccessible(page, 'task (queued)');
    await server.startWorker();
    // The status word changes on its own, from queued to succeeded.
    await statusBadge(page).filter({ hasText: /^succeeded$/ }).waitFor({ timeout: RENDER_TIMEOUT_MS });
    expect(navigations.count).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __e2eMarker?: string }).__e2eMarker)).toBe('not reloaded');
    // The page showed the task queued first, then succeeded: it followed the change itself.
    const seen = await statusesSeen(page);
    expect(seen[0], `statuses shown: ${seen.join(' → ')}`).toBe('queued');
    expect(seen.at(-1)).toBe('succeeded');

    const task = await taskOf(server, requestId);
    expect(task).toMatchObject({ status: 'succeeded', output: { url: expect.stringContaining('/files/') } });
    const video = page.locator('video');
    await video.waitFor();
    expect(await video.evaluate((v: HTMLVideoElement) => v.currentSrc || v.src)).toBe(task.output!.url);
    expect(await page.getByRole('link', { name: 'Download' }).getAttribute('href')).toBe(task.output!.url);

    await video.evaluate((v: HTMLVideoElement) => {
      v.muted = true;
      return v.play();
    });
    await page.waitForFunction(() => (document.querySelector('video')?.currentTime ?? 0) > 0.5, undefined, { timeout: 30_000 });
    // The browser fetched the file in ranges, and the server answered them (206).
    expect(ranges.length).toBeGreaterThan(0);
    expect(ranges[0]).toMatch(/^bytes=\d+-/);
    await video.evaluate((v: HTMLVideoElement) => v.pause());

    await expectAccessible(page, 'task (succeeded)');
    await screenshot(page, 'server-task');
    expect(navigations.count).toBe(0);
    expect(problems.errors).toEqual([]);
    succeededTaskId = requestId;
  });

  it('cancels a queued task, and the header balance gets its price back', async () => {
    const { page, problems } = await open();
    await signIn(page, idle.consoleUrl, idle.devKey);
    const before = ((await (await idle.api('/account')).json()) as { balance: number }).balance;
    await expectHeaderBalance(page, before);
    await openFromNav(page, 'Generate', /generate/i);
    await generate(page, 'A lighthouse at dusk, waves breaking below');
    const requestId = taskIdFromUrl(page);

    // No worker runs on this server: the task stays queued, its price held.
    const queued = await taskOf(idle, requestId);
    expect(queued.status).toBe('queued');
    expect(queued.creditsCharged).toBeGreaterThan(0);
    await statusBadge(page).filter({ hasText: /^queued$/ }).waitFor();
    await expectHeaderBalance(page, before - queued.creditsCharged);
    await expectAccessible(page, 'task (queued)');

    await page.getByRole('button', { name: 'Cancel task' }).click();

    await statusBadge(page).filter({ hasText: /^cancelled$/ }).waitFor();
    // Up by exactly the price: back to where it was before the submission.
    await expectHeaderBalance(page, before);
    expect((await headerBalance(page)) - (before - queued.creditsCharged)).toBe(queued.creditsCharged);
    expect((await taskOf(idle, requestId)).status).toBe('cancelled');
    expect(problems.errors).toEqual([]);
  });

  it('creates a key, shows it once, and revokes it: the API then refuses it', async () => {
    const { page, problems } = await open();
    await signIn(page, server.consoleUrl, server.devKey);
    await openFromNav(page, 'Keys', /keys/i);
    await expectAccessible(page, 'keys');

    const name = `e2e-${Date.now()}`;
    await page.getByLabel('Name').fill(name);
    await page.getByLabel('tasks:read', { exact: true }).check();
    await page.getByLabel('tasks:write', { exact: true }).check();
    await page.getByRole('button', { name: 'Create key' }).click();

    const shown = page.locator('code[data-testid=new-key]');
    await shown.waitFor();
    const newKey = ((await shown.textContent()) ?? '').trim();
    // Compared, not printed: a failure must not put the key in the test's output.
    expect(/^vg_(test|live)_[0-9A-Za-z]+$/.test(newKey), 'the new key looks like a key').toBe(true);
    await expectAccessible(page, 'keys (new key shown)');
    const account = await server.api('/account', {}, newKey);
    expect(account.status).toBe(200);
    expect(((await account.json()) as { key: { name: string; scopes: string[] } }).key).toMatchObject({ name, scopes: ['tasks:read', 'tasks:write'] });

    await page.getByRole('button', { name: 'Done' }).click();
    await shown.waitFor({ state: 'detached' });
    expect((await page.content()).includes(newKey), 'the new key is still in the page').toBe(false);
    await expectAccessible(page, 'keys');
    await screenshot(page, 'server-keys');

    await page.getByRole('button', { name: `Revoke ${name}` }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await expectAccessible(page, 'keys (revoke dialog)');
    await dialog.getByRole('button', { name: 'Revoke key' }).click();
    await dialog.waitFor({ state: 'hidden' });
    const row = page.getByRole('row').filter({ hasText: name });
    await expect.poll(async () => (await row.textContent()) ?? '', { timeout: 15_000 }).toMatch(/revoked/i);
    await expect(page.getByRole('button', { name: `Revoke ${name}` }).count()).resolves.toBe(0);

    expect((await server.api('/account', {}, newKey)).status).toBe(401);
    // The signed-in key still works.
    expect((await server.api('/account')).status).toBe(200);
    expect(problems.errors).toEqual([]);
  });

  it('shows and rotates the webhook secret', async () => {
    const { page, problems } = await open();
    await signIn(page, server.consoleUrl, server.devKey);
    await openFromNav(page, 'Webhooks', /webhooks/i);
    await expectAccessible(page, 'webhooks');
    // Screenshot while the secret is masked.
    await screenshot(page, 'server-webhooks');

    const secret = page.getByTestId('webhook-secret');
    const secretText = async () => ((await secret.textContent()) ?? '').trim();
    // Masked, it still starts with whsec_: only the whole secret matches.
    const WHOLE = /^whsec_[A-Za-z0-9+/=]{32,}$/;
    await secret.waitFor();
    expect(await secretText()).not.toMatch(WHOLE);
    await page.getByRole('button', { name: 'Show secret' }).click();
    await expect.poll(secretText).toMatch(WHOLE);
    const before = await secretText();
    const api = async () => (await (await server.api('/account/webhooks/secret')).json()) as { secret: string };
    expect(before).toBe((await api()).secret);

    await page.getByLabel('Overlap (hours)').fill('1');
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const dialog = page.getByRole('dialog');
    await dialog.waitFor();
    await expectAccessible(page, 'webhooks (rotate dialog)');
    await dialog.getByRole('button', { name: 'Rotate', exact: true }).click();
    await dialog.waitFor({ state: 'hidden' });

    // The page may mask the new secret again; show it if so.
    await expect
      .poll(
        async () => {
          const show = page.getByRole('button', { name: 'Show secret' });
          if (await show.isVisible()) await show.click();
          return secretText();
        },
        { timeout: 15_000 },
      )
      .toMatch(WHOLE);
    await expect.poll(secretText, { timeout: 15_000 }).not.toBe(before);
    const after = await secretText();
    expect(after).toMatch(WHOLE);
    expect(after).toBe((await api()).secret);
    // Hidden again before anything else is looked at.
    await page.getByRole('button', { name: 'Hide secret' }).click();
    expect(await secretText()).not.toMatch(WHOLE);
    await expectAccessible(page, 'webhooks (rotated)');
    expect(problems.errors).toEqual([]);
  });

  it('passes axe and is screenshot on every page at 1280×800 and 390×844', async () => {
    expect(succeededTaskId, 'the generate test made a succeeded task').toBeDefined();
    for (const viewport of ['desktop', 'phone'] as const) {
      const { page, problems } = await open(viewport);
      await page.goto(server.consoleUrl);
      await page.getByLabel('API key').waitFor();
      await expectAccessible(page, `sign-in at ${viewport}`);
      await screenshot(page, 'server-sign-in');
      await signIn(page, server.consoleUrl, server.devKey);
      const visit = async (path: string, name: string, ready: (page: Page) => Promise<unknown>) => {
        await page.goto(`${server.url}/console${path}`);
        await page.getByRole('navigation', { name: 'Main' }).waitFor();
        await page.getByRole('heading', { level: 1 }).waitFor();
        await ready(page);
        await expectAccessible(page, `${name} at ${viewport}`);
        await screenshot(page, `server-${name}`);
      };
      await visit('/', 'overview', (p) => p.getByTestId('header-balance').waitFor());
      await visit('/generate', 'generate', (p) => p.getByRole('button', { name: 'Generate' }).waitFor());
      await visit('/tasks', 'tasks', (p) => p.getByText(succeededTaskId!).first().waitFor());
      await visit(`/tasks/${succeededTaskId}`, 'task', async (p) => {
        await statusBadge(p).filter({ hasText: /^succeeded$/ }).waitFor();
        await p.waitForFunction(() => (document.querySelector('video')?.readyState ?? 0) >= 2);
      });
      await visit('/keys', 'keys', (p) => p.getByRole('button', { name: 'Create key' }).waitFor());
      await visit('/webhooks', 'webhooks', (p) => p.getByRole('button', { name: 'Show secret' }).waitFor());
      expect(problems.errors).toEqual([]);
    }
  });

  it('signs out: the key is forgotten, and a reload shows the sign-in form', async () => {
    const { page, problems } = await open();
    await signIn(page, server.consoleUrl, server.devKey);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('API key').waitFor();
    // The names of the items that hold a key (never their values, which would be printed on a failure).
    const storage = await page.evaluate((item) => ({
      holdingAKey: Object.keys(sessionStorage).filter((k) => k === item || /vg_(test|live)_/.test(sessionStorage.getItem(k) ?? '')),
      local: localStorage.length,
    }), KEY_STORAGE_ITEM);
    expect(storage.holdingAKey).toEqual([]);
    expect(storage.local).toBe(0);
    await page.reload();
    await page.getByLabel('API key').waitFor();
    expect(await page.getByRole('navigation', { name: 'Main' }).count()).toBe(0);
    expect(problems.errors).toEqual([]);
  });
});

if (skipBrowser) it.skip(SKIP_REASON, () => {});
