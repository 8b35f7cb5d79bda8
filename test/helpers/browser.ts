// Jest helper: one headless Chromium (Debian's `chromium`, installed by scripts/setup.sh with
// SLOTPROXY_NEED_CHROMIUM=1) driven by playwright-core, launched in beforeAll and always closed in
// afterAll; each page records the console errors and failed requests it saw.
import fs from 'node:fs';
import { Browser, Page, chromium } from 'playwright-core';

const CANDIDATES = [process.env.SLOTPROXY_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'];

function executable(): string {
  const found = CANDIDATES.find((c): c is string => c !== undefined && c !== '' && fs.existsSync(c));
  if (found === undefined) throw new Error('no chromium: run SLOTPROXY_NEED_CHROMIUM=1 bash scripts/setup.sh (or set SLOTPROXY_CHROMIUM)');
  return found;
}

export interface WatchedPage {
  page: Page;
  /** console.error messages, uncaught exceptions and failed requests, in order. */
  errors: string[];
}

export function useBrowser(): { open: (url: string) => Promise<WatchedPage> } {
  let browser: Browser | undefined;
  const pages: Page[] = [];
  beforeAll(async () => {
    // --no-sandbox: the tests run as root, where Chromium's sandbox refuses to start.
    browser = await chromium.launch({ executablePath: executable(), args: ['--no-sandbox', '--disable-gpu'] });
  }, 60_000);
  afterAll(async () => {
    for (const p of pages) await p.close().catch(() => undefined);
    await browser?.close();
  }, 30_000);
  return {
    open: async (url) => {
      if (browser === undefined) throw new Error('useBrowser: chromium did not start');
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      pages.push(page);
      const errors: string[] = [];
      page.on('console', (m) => {
        if (m.type() === 'error') errors.push(`console: ${m.text()}`);
      });
      page.on('pageerror', (e) => errors.push(`page: ${e.message}`));
      page.on('requestfailed', (r) => errors.push(`request ${r.url()}: ${r.failure()?.errorText ?? 'failed'}`));
      await page.goto(url);
      return { page, errors };
    },
  };
}
