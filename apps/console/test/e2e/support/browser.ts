/**
 * Debian's Chromium driven by playwright-core (no browser download), with what every browser
 * test needs: axe-core run in the page, screenshots at a desktop and a phone size kept under
 * test-results/screenshots, and a record of what the page logged as an error.
 */
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';
/** Locally a missing Chromium skips the browser tests; with CI=true it fails them. */
export const skipBrowser = !existsSync(CHROMIUM) && process.env.CI !== 'true';
export const SKIP_REASON = 'Debian package chromium is not installed: apt-get install chromium';

export const SCREENSHOT_DIR = resolve(import.meta.dirname, '../../../test-results/screenshots');

export const VIEWPORTS = {
  desktop: { width: 1280, height: 800 },
  phone: { width: 390, height: 844 },
} as const;

export async function launchChromium(): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(SKIP_REASON);
  return chromium.launch({
    executablePath: CHROMIUM,
    // Without the background-networking flags Chromium tries to reach Google's hosts, which this machine cannot.
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      // Videos start on play() without a click, as the tests ask them to.
      '--autoplay-policy=no-user-gesture-required',
    ],
  });
}

export interface PageProblems {
  /** console.error lines, uncaught exceptions and CSP violations: none is expected. */
  errors: string[];
}

export async function newPage(browser: Browser, viewport: keyof typeof VIEWPORTS = 'desktop'): Promise<{ context: BrowserContext; page: Page; problems: PageProblems }> {
  const context = await browser.newContext({ viewport: VIEWPORTS[viewport], reducedMotion: 'reduce' });
  const page = await context.newPage();
  const problems: PageProblems = { errors: [] };
  page.on('console', (message) => {
    if (message.type() === 'error') problems.errors.push(`console: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.errors.push(`pageerror: ${error.message}`));
  return { context, page, problems };
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/** axe-core's WCAG 2.x A/AA rules on the page as it is now; only serious and critical violations are returned. */
export async function seriousAxeViolations(page: Page): Promise<AxeViolation[]> {
  // Injected through the DevTools protocol, not a <script>: the console's CSP forbids inline scripts, rightly.
  await page.evaluate(axeSource);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (context: Document, options: object) => Promise<{ violations: any[] }> } }).axe;
    const result = await axe.run(document, { runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } });
    return result.violations.map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n: { target: string[] }) => n.target.join(' ')) }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** Saves `<name>-<viewport>.png` under test-results/screenshots (kept by the run). */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const size = page.viewportSize();
  const label = size?.width === VIEWPORTS.phone.width ? 'phone' : 'desktop';
  const path = resolve(SCREENSHOT_DIR, `${name}-${label}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Signs in on the console's form with a pasted key and waits for the navigation to appear. */
export async function signIn(page: Page, consoleUrl: string, apiKey: string): Promise<void> {
  await page.goto(consoleUrl);
  await page.getByLabel('API key').fill(apiKey);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('navigation', { name: 'Main' }).waitFor();
}
