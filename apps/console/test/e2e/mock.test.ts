/**
 * The smoke run of the console on the Prism mock, as `pnpm --filter @vidgen/console dev` serves it
 * (scripts/dev-server.mjs, on a port the OS chooses): in Chromium, at 1280×800 and 390×844, the
 * sign-in page and then every page, each showing what the spec's examples hold (read from the
 * bundle, never written here), with no serious axe-core violation, no page error (CSP violations
 * included) and a screenshot kept under test-results/screenshots (mock-<page>-<viewport>.png).
 * The task page's video (the examples' output.url, on localhost:8080) is played from the dev
 * server's sample; the sample route's ranges are checked too.
 */
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUNDLE, SAMPLE_VIDEO, startDevServer, type DevServer } from '../../scripts/dev-server.mjs';
import { launchChromium, newPage, screenshot, seriousAxeViolations, signIn, skipBrowser, SKIP_REASON, VIEWPORTS, type PageProblems } from './support/browser';

/** Prism accepts any bearer; the console accepts any key of this shape. */
const MOCK_KEY = `vg_test_${'m0ck'.repeat(10)}`;
/** The spec's examples point output.url at the real server's default address. */
const EXAMPLE_FILES = 'http://localhost:8080/files/';

// ---------------------------------------------------------------------------------------------
// The spec's examples, as Prism serves them: the first example of each operation's answer.

type Json = any;
const bundle: Json = JSON.parse(readFileSync(BUNDLE, 'utf8'));

function resolveRef(node: Json): Json {
  while (node && typeof node === 'object' && typeof node.$ref === 'string') {
    node = (node.$ref as string)
      .slice(2)
      .split('/')
      .reduce((at: Json, part: string) => at[part.replace(/~1/g, '/').replace(/~0/g, '~')], bundle);
  }
  return node;
}

function served(operationId: string, status = 200): Json {
  for (const item of Object.values(bundle.paths) as Json[]) {
    for (const op of Object.values(item) as Json[]) {
      if (op?.operationId !== operationId) continue;
      const media = resolveRef(op.responses[String(status)]).content['application/json'];
      const first = Object.values(media.examples)[0];
      return resolveRef(first).value;
    }
  }
  throw new Error(`no operation ${operationId} in the bundle`);
}

const account = served('getAccount');
const models = served('listModels');
const tasks = served('listGenerations');
const task = served('getGeneration');
const keys = served('listApiKeys');
const deliveries = served('listWebhookDeliveries');

/** The task page opened: the first succeeded task of the list (Prism answers getGeneration's first example for any id). */
const succeededInList = (tasks.data as Json[]).find((t) => t.status === 'succeeded');

describe('the spec examples the mock serves', () => {
  it('are rich enough for every page', () => {
    expect(account.key.scopes).toEqual(expect.arrayContaining(['tasks:read', 'tasks:write', 'keys:manage', 'webhooks:manage']));
    expect(tasks.data.length).toBeGreaterThanOrEqual(6);
    expect(new Set(tasks.data.map((t: Json) => t.status))).toEqual(new Set(['queued', 'processing', 'succeeded', 'failed', 'cancelled']));
    expect(tasks.nextCursor).toBeTruthy();
    expect(task.status).toBe('succeeded');
    expect(task.output.url.startsWith(EXAMPLE_FILES)).toBe(true);
    expect(succeededInList?.requestId).toBe(task.requestId);
    expect(served('getUsage').data).toHaveLength(30);
    expect(keys.data.some((k: Json) => k.revokedAt !== null)).toBe(true);
    expect(new Set(deliveries.data.map((d: Json) => d.status))).toEqual(new Set(['pending', 'delivered', 'failed']));
    const attempts = served('getWebhookDelivery').attemptHistory as Json[];
    expect(attempts.some((a) => a.statusCode === null || a.statusCode >= 300)).toBe(true);
    expect(attempts.at(-1).statusCode).toBeGreaterThanOrEqual(200);
    expect(attempts.at(-1).statusCode).toBeLessThan(300);
  });
});

// ---------------------------------------------------------------------------------------------
// The dev server: the sample video route, and the proxy in real-server mode.

/** The dev server in mock mode, as `pnpm dev` starts it, but on a port the OS chooses and without hot reload. */
let mock: DevServer;
beforeAll(async () => {
  mock = await startDevServer({ port: 0, host: '127.0.0.1', watch: false, logLevel: 'warn' });
});
afterAll(() => mock?.close());

describe('the dev server', () => {
  it('serves the console and proxies the API to Prism', async () => {
    expect(mock.mode).toBe('mock');
    const origin = new URL(mock.url).origin;
    const page = await fetch(mock.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('<div id="root">');
    const answer = await fetch(`${origin}/api/open/v1/account`, { headers: { Authorization: `Bearer ${MOCK_KEY}` } });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toEqual(account);
    expect((await fetch(`${origin}/openapi.json`)).status).toBe(200);
    expect((await fetch(`${origin}/healthz`)).status).toBe(200);
  });

  it('answers /files/*.mp4 with the sample H.264 video, whole, in ranges and to HEAD', async () => {
    const sample = readFileSync(SAMPLE_VIDEO);
    // A real MP4 (ftyp), H.264 (avc1), small, with its index first (+faststart: moov before mdat).
    expect(sample.subarray(4, 8).toString('latin1')).toBe('ftyp');
    expect(sample.includes(Buffer.from('avc1'))).toBe(true);
    expect(sample.indexOf(Buffer.from('moov'))).toBeLessThan(sample.indexOf(Buffer.from('mdat')));
    expect(sample.length).toBeLessThan(150_000);

    const url = new URL(task.output.url);
    const file = `${new URL(mock.url).origin}${url.pathname}${url.search}`;
    const whole = await fetch(file);
    expect(whole.status).toBe(200);
    expect(whole.headers.get('content-type')).toBe('video/mp4');
    expect(whole.headers.get('accept-ranges')).toBe('bytes');
    expect(Buffer.from(await whole.arrayBuffer()).equals(sample)).toBe(true);

    const ranged = await fetch(file, { headers: { Range: 'bytes=0-99' } });
    expect(ranged.status).toBe(206);
    expect(ranged.headers.get('content-range')).toBe(`bytes 0-99/${sample.length}`);
    expect(ranged.headers.get('content-length')).toBe('100');
    expect(Buffer.from(await ranged.arrayBuffer()).equals(sample.subarray(0, 100))).toBe(true);

    const tail = await fetch(file, { headers: { Range: 'bytes=-10' } });
    expect(tail.status).toBe(206);
    expect(tail.headers.get('content-range')).toBe(`bytes ${sample.length - 10}-${sample.length - 1}/${sample.length}`);
    await tail.arrayBuffer();

    const past = await fetch(file, { headers: { Range: `bytes=${sample.length}-` } });
    expect(past.status).toBe(416);
    expect(past.headers.get('content-range')).toBe(`bytes */${sample.length}`);
    await past.arrayBuffer();

    const head = await fetch(file, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('content-length')).toBe(String(sample.length));
  });

  it('refuses a port that is taken, in one line', async () => {
    const port = Number(new URL(mock.url).port);
    const refused = await startDevServer({ port, host: '127.0.0.1', watch: false, logLevel: 'silent' }).then(
      async (server) => {
        await server.close();
        return undefined;
      },
      (error: Error) => error,
    );
    expect(refused?.message).toMatch(new RegExp(`^port ${port} on 127\\.0\\.0\\.1 is taken`));
    expect(refused?.message).not.toContain('\n');
  });

  it('against a real server, proxies /api, /files, /openapi.json and /healthz with nothing changed but the target', async () => {
    const seen: { method: string; url: string; host: string | undefined; authorization: string | undefined; body: string }[] = [];
    const upstream: Server = createServer((request: IncomingMessage, response) => {
      let body = '';
      request.on('data', (chunk) => (body += chunk));
      request.on('end', () => {
        seen.push({ method: request.method!, url: request.url!, host: request.headers.host, authorization: request.headers.authorization, body });
        response.writeHead(200, { 'Content-Type': 'application/json' }).end('{"ok":true}');
      });
    });
    await new Promise<void>((done) => upstream.listen(0, '127.0.0.1', done));
    const api = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    const real = await startDevServer({ api, port: 0, watch: false, logLevel: 'silent' });
    try {
      expect(real.mode).toBe('real');
      expect(real.api).toBe(api);
      const origin = new URL(real.url).origin;
      const host = new URL(real.url).host;
      const body = JSON.stringify({ model: 'vidgen-2.0', prompt: 'a paper boat' });
      await fetch(`${origin}/api/open/v1/video/generations?x=1&y=%2F`, { method: 'POST', headers: { Authorization: `Bearer ${MOCK_KEY}`, 'Content-Type': 'application/json' }, body });
      await fetch(`${origin}/files/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0.mp4?expires=1&sig=abc`);
      await fetch(`${origin}/openapi.json`);
      await fetch(`${origin}/healthz`);
      expect(seen).toEqual([
        { method: 'POST', url: '/api/open/v1/video/generations?x=1&y=%2F', host, authorization: `Bearer ${MOCK_KEY}`, body },
        { method: 'GET', url: '/files/gen_01JD6Z8K4T9QW3M5R7X2B6C8N0.mp4?expires=1&sig=abc', host, authorization: undefined, body: '' },
        { method: 'GET', url: '/openapi.json', host, authorization: undefined, body: '' },
        { method: 'GET', url: '/healthz', host, authorization: undefined, body: '' },
      ]);
    } finally {
      await real.close();
      await new Promise((done) => upstream.close(done));
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Every page in Chromium.

interface PageCheck {
  name: string;
  path: string;
  /** What the spec's examples put on this page; resolves once it is all on screen. */
  shows(page: Page): Promise<void>;
}

const main = (page: Page) => page.locator('main');

/** `1364` as the browser's locale writes it (the console formats with the reader's locale). */
const inLocale = (page: Page, n: number) => page.evaluate((value) => new Intl.NumberFormat(undefined, { maximumFractionDigits: 0 }).format(value), n);

const PAGES: PageCheck[] = [
  {
    name: 'overview',
    path: '',
    async shows(page) {
      await main(page).getByText(`${await inLocale(page, account.balance)} credits`, { exact: true }).first().waitFor();
      await main(page).getByRole('link', { name: tasks.data[0].requestId, exact: true }).first().waitFor();
    },
  },
  {
    name: 'generate',
    path: 'generate',
    async shows(page) {
      const model = main(page).getByLabel('Model', { exact: true });
      await model.waitFor();
      for (const name of ['Duration', 'Resolution', 'Aspect ratio']) await main(page).getByLabel(name, { exact: true }).waitFor();
      await main(page).getByLabel('Prompt', { exact: true }).waitFor();
      await main(page).getByRole('button', { name: 'Generate', exact: true }).waitFor();
      const options = await model.locator('option').evaluateAll((list) => list.map((o) => `${(o as HTMLOptionElement).value} ${o.textContent}`).join('\n'));
      for (const { id } of models.data) expect(options, `the Model select offers ${id}`).toContain(id);
      await main(page).getByText(/credits/).first().waitFor();
    },
  },
  {
    name: 'tasks',
    path: 'tasks',
    async shows(page) {
      await main(page).getByLabel('Status', { exact: true }).waitFor();
      for (const { requestId } of tasks.data) {
        const link = main(page).getByRole('link', { name: requestId, exact: true });
        await link.waitFor();
        expect(await link.getAttribute('href')).toBe(`/console/tasks/${requestId}`);
      }
      const next = main(page).getByRole('button', { name: 'Next page' });
      await next.waitFor();
      expect(await next.isEnabled(), 'Next page is enabled (the example has a nextCursor)').toBe(true);
    },
  },
  {
    name: 'task',
    path: `tasks/${succeededInList.requestId}`,
    async shows(page) {
      await main(page).getByText(task.status, { exact: true }).first().waitFor();
      await main(page).getByText(task.requestId).first().waitFor();
      const download = main(page).getByRole('link', { name: 'Download' });
      await download.waitFor();
      expect(await download.getAttribute('href')).toBe(task.output.url);
      await main(page).locator('video').waitFor();
      expect(await main(page).locator('video').evaluate((video: HTMLVideoElement) => video.currentSrc || video.src || video.querySelector('source')?.src)).toBe(task.output.url);
    },
  },
  {
    name: 'keys',
    path: 'keys',
    async shows(page) {
      await main(page).getByLabel('Name', { exact: true }).waitFor();
      await main(page).getByRole('button', { name: 'Create key' }).waitFor();
      for (const { hint } of keys.data) await main(page).getByText(hint).first().waitFor();
    },
  },
  {
    name: 'webhooks',
    path: 'webhooks',
    async shows(page) {
      await main(page).getByRole('button', { name: 'Rotate secret' }).waitFor();
      await main(page).getByTestId('webhook-secret').waitFor();
      for (const { requestId } of deliveries.data) await main(page).getByRole('link', { name: requestId }).first().waitFor();
    },
  },
];

/** The page's one h1, and no loading state left (the shared <Loading> or anything aria-busy). */
async function settled(page: Page): Promise<void> {
  await page.getByRole('heading', { level: 1 }).first().waitFor();
  await page.waitForFunction(() => !document.querySelector('.state-loading, [aria-busy="true"]'));
  expect(await page.locator('h1').count(), 'one h1 per page').toBe(1);
}

async function expectAccessible(page: Page, label: string): Promise<void> {
  const violations = await seriousAxeViolations(page);
  expect(violations.map((v) => `${label} (${page.url()}): ${v.id} [${v.impact}] ${v.help} at ${v.targets.join(', ')}`)).toEqual([]);
}

describe.skipIf(skipBrowser)(`the console on the mock, in Chromium${skipBrowser ? ` (skipped: ${SKIP_REASON})` : ''}`, () => {
  let server: DevServer;
  let browser: Browser;

  beforeAll(async () => {
    server = mock;
    browser = await launchChromium();
  });
  afterAll(() => browser?.close());

  for (const viewport of Object.keys(VIEWPORTS) as (keyof typeof VIEWPORTS)[]) {
    describe(`at ${VIEWPORTS[viewport].width}×${VIEWPORTS[viewport].height}`, () => {
      let context: BrowserContext;
      let page: Page;
      let problems: PageProblems;

      beforeAll(async () => {
        ({ context, page, problems } = await newPage(browser, viewport));
        // The examples' videos are on localhost:8080; this run's dev server is elsewhere: same path, its port.
        const devOrigin = new URL(server.url).origin;
        await page.route(`${EXAMPLE_FILES}**`, (route) => route.continue({ url: route.request().url().replace('http://localhost:8080', devOrigin) }));
      });
      afterAll(() => context?.close());

      it('sign-in page', async () => {
        await page.goto(server.url);
        await page.getByRole('heading', { level: 1 }).waitFor();
        await page.getByLabel('API key').waitFor();
        await page.getByRole('button', { name: 'Sign in' }).waitFor();
        expect(await page.locator('h1').count()).toBe(1);
        await expectAccessible(page, 'sign-in');
        await screenshot(page, 'mock-sign-in');
        expect(problems.errors).toEqual([]);

        await signIn(page, server.url, MOCK_KEY);
        const nav = page.getByRole('navigation', { name: 'Main' });
        for (const name of ['Overview', 'Generate', 'Tasks', 'Keys', 'Webhooks']) await nav.getByRole('link', { name, exact: true }).waitFor();
        expect(problems.errors).toEqual([]);
      });

      for (const check of PAGES) {
        it(`${check.name} page`, async () => {
          problems.errors.length = 0;
          await page.goto(`${server.url}${check.path}`);
          await settled(page);
          await check.shows(page);
          await settled(page);
          await expectAccessible(page, check.name);
          await screenshot(page, `mock-${check.name}`);
          expect(problems.errors).toEqual([]);
        });
      }

      it('task page: the video plays', async () => {
        problems.errors.length = 0;
        await page.goto(`${server.url}tasks/${succeededInList.requestId}`);
        const video = main(page).locator('video');
        await video.waitFor();
        await video.evaluate((element: HTMLVideoElement) => {
          element.muted = true;
          return element.play();
        });
        await page.waitForFunction(() => {
          const element = document.querySelector('main video') as HTMLVideoElement | null;
          return !!element && element.currentTime > 0.25 && !element.paused;
        });
        expect(await video.evaluate((element: HTMLVideoElement) => ({ error: element.error?.code ?? null, width: element.videoWidth, height: element.videoHeight }))).toEqual({
          error: null,
          width: 640,
          height: 360,
        });
        expect(problems.errors).toEqual([]);
      });
    });
  }
});
