// The dashboard in a real headless Chromium (Debian's, driven by playwright-core) against three real regions:
// three redis-servers and three region processes with live traffic. A partition is started for real (a
// region's redis-server is killed) and announced the way the chaos lab does; the page must show the link down
// and the partition shaded within seconds. Screenshots go to reports/dashboard/ (to docs/img/ with
// UPDATE_SCREENSHOTS=1, so a test run never changes tracked files).
import { existsSync, mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDashboardDemo, type DashboardDemo } from '../../tools/dashboard-demo/demo.ts';
import { redisServerAvailable } from '../../src/ops/redis-process.ts';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const IMAGES = fileURLToPath(
  new URL(process.env.UPDATE_SCREENSHOTS === '1' ? '../../docs/img/' : '../../reports/dashboard/', import.meta.url),
);
mkdirSync(IMAGES, { recursive: true });
const haveChromium = existsSync(CHROMIUM);
const haveRedis = redisServerAvailable();

if (!haveChromium) {
  console.warn(`SKIPPED dashboard browser test: ${CHROMIUM} is missing. Install it with: bash .ci/install-chromium.sh`);
}
if (!haveRedis) console.warn('SKIPPED dashboard browser test: redis-server is not on PATH');

/** A partition must be visible on the page within this long of it starting. */
const SHOWS_WITHIN_MS = 5_000;

describe.skipIf(!haveChromium || !haveRedis)('dashboard in headless Chromium', () => {
  let demo: DashboardDemo;
  let browser: Browser;
  let page: Page;
  const browserErrors: string[] = [];

  beforeAll(async () => {
    [demo, browser] = await Promise.all([
      startDashboardDemo({ root: ROOT, ratePerRegion: 10, logLevel: 'error', log: (line) => console.log(line) }),
      chromium.launch({
        executablePath: CHROMIUM,
        headless: true,
        args: [
          '--no-sandbox',
          '--disable-gpu',
          '--disable-dev-shm-usage',
          '--disable-background-networking',
          '--disable-component-update',
          '--disable-sync',
          '--no-first-run',
        ],
      }),
    ]);
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    page.on('pageerror', (error) => browserErrors.push(error.message));
    page.on('console', (message) => {
      if (message.type() === 'error') browserErrors.push(message.text());
    });
    mkdirSync(IMAGES, { recursive: true });
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await demo?.stop();
  }, 30_000);

  it('loads, shows three regions with live links, key views and endpoint rates', async () => {
    const usEast = demo.region('us-east');
    const response = await page.goto(usEast.dashboardUrl);
    expect(response?.status()).toBe(200);
    expect(response?.headers()['content-security-policy']).toContain("connect-src 'self'");

    await page.waitForSelector('body[data-regions="3"]', { timeout: 10_000 });
    for (const name of ['ap-south', 'eu-west', 'us-east']) {
      await expect(page.locator(`[data-testid="region-${name}"]`).count()).resolves.toBe(1);
    }
    await expect(page.locator('[data-testid="region-us-east"]').getAttribute('data-state')).resolves.toBe('self');
    await page.waitForSelector('[data-testid="link-us-east-ap-south"][data-state="up"]', { timeout: 10_000 });
    await page.waitForSelector('[data-testid="link-us-east-eu-west"][data-state="up"]', { timeout: 10_000 });

    // Live: the hot key's own consumption grows while the page is open.
    const ownOf = async () => Number(await page.locator('[data-testid="key-hot key"] td').nth(2).textContent());
    await page.waitForFunction(
      () => {
        const cell = document.querySelector('[data-testid="key-hot key"] td:nth-child(3)');
        return cell !== null && Number(cell.textContent) > 0;
      },
      undefined,
      { timeout: 10_000 },
    );
    const before = await ownOf();
    await page.waitForFunction(
      (seen) => {
        const cell = document.querySelector('[data-testid="key-hot key"] td:nth-child(3)');
        const value = Number(cell?.textContent);
        // Grows, or a new window started and the count restarted.
        return value !== seen;
      },
      before,
      { timeout: 10_000 },
    );
    await page.waitForSelector('[data-testid="endpoint-/search"]', { timeout: 10_000 });
    await expect(page.locator('[data-testid="breaker-state"]').getAttribute('data-state')).resolves.toBe('closed');
    await expect(page.locator('[data-testid="partition-status"]').getAttribute('data-active')).resolves.toBe('no');

    // A few seconds of history so the charts have lines, and a first leakage reading as the chaos lab posts it.
    await demo.annotate({ scenario: 'baseline', leakage: demo.leakage() });
    await page.waitForSelector('[data-testid="leakage-meter"][data-state="within"]', { timeout: 5_000 });
    await page.waitForTimeout(6_000);
    await page.screenshot({ path: `${IMAGES}dashboard-healthy.png`, fullPage: true });
    expect(browserErrors).toEqual([]);
  }, 45_000);

  it('shows a partition within seconds of it starting, then the heal', async () => {
    const started = Date.now();
    // Real partition: ap-south's Redis goes away, so nothing reaches ap-south; then announce it like the chaos lab.
    await demo.partition('ap-south');
    await demo.annotate({ scenario: 'partition ap-south', partition: { region: 'ap-south', since: started } });

    await page.waitForSelector('[data-testid="link-us-east-ap-south"][data-state="down"]', { timeout: SHOWS_WITHIN_MS });
    await page.waitForSelector('[data-testid="partition-shade"]', { timeout: SHOWS_WITHIN_MS });
    await page.waitForSelector('[data-testid="partition-status"][data-active="yes"]', { timeout: SHOWS_WITHIN_MS });
    const shownAfterMs = Date.now() - started;
    console.log(`partition visible on the page ${shownAfterMs} ms after it started`);

    await expect(page.locator('[data-testid="partition-status"]').textContent()).resolves.toContain('ap-south');
    await expect(page.locator('[data-testid="region-ap-south"]').getAttribute('data-state')).resolves.toBe('down');
    await expect(page.locator('[data-testid="topology-link-ap-south-us-east"]').getAttribute('data-cut')).resolves.toBe('yes');
    // The link that did not fail stays up: the page tells the partition apart from "everything is down".
    await expect(page.locator('[data-testid="link-us-east-eu-west"]').getAttribute('data-state')).resolves.toBe('up');

    // The chaos lab keeps posting its leakage reading while the partition lasts.
    for (let i = 0; i < 6; i++) {
      await demo.annotate({ leakage: demo.leakage() });
      await page.waitForTimeout(1_000);
    }
    await expect(page.locator('[data-testid="leakage-text"]').textContent()).resolves.toMatch(/of budget 15/);
    await page.screenshot({ path: `${IMAGES}dashboard-partitioned.png`, fullPage: true });

    // Heal: the link comes back, the announced partition closes, and its shade stays as history on the chart.
    await demo.heal('ap-south');
    await demo.annotate({ partition: { region: 'ap-south', since: started, until: Date.now() } });
    await page.waitForSelector('[data-testid="link-us-east-ap-south"][data-state="up"]', { timeout: 10_000 });
    await page.waitForSelector('[data-testid="partition-status"][data-active="no"]', { timeout: 5_000 });
    await expect(page.locator('[data-testid="partition-shade"]').count()).resolves.toBeGreaterThan(0);
    expect(browserErrors).toEqual([]);
  }, 45_000);
});
