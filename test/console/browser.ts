/**
 * Headless Debian Chromium driven by playwright-core, a fresh profile per
 * launch. Outside CI a missing browser skips the browser tests with a
 * message; in CI (CI=true) the launch runs anyway and fails loudly.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { describe } from 'vitest';

export const CHROMIUM = '/usr/bin/chromium';
const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const ARTIFACTS = new URL('../../test-artifacts/console/', import.meta.url);

const available = existsSync(CHROMIUM);
if (!available && process.env.CI !== 'true') {
  console.warn(
    `[console tests] SKIPPED: no Chromium at ${CHROMIUM} (apt-get install -y chromium). In CI (CI=true) this fails.`,
  );
}

/** `describe`, or `describe.skip` when there is no browser and this is not CI. */
export const describeBrowser = (
  available || process.env.CI === 'true' ? describe : describe.skip
) as typeof describe;

export interface Browser {
  page: Page;
  context: BrowserContext;
  /** Messages of every alert/confirm/prompt the page opened: untrusted text must never open one. */
  dialogs: string[];
  /** Console messages about blocked content (CSP violations) and page errors. */
  problems: string[];
  screenshot(name: string): Promise<void>;
  close(): Promise<void>;
}

export async function launch(width = 1280, height = 800): Promise<Browser> {
  const profile = mkdtempSync(join(tmpdir(), 'idem-console-'));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ARGS,
      viewport: { width, height },
      timeout: 60_000,
    });
  } catch (err) {
    rmSync(profile, { recursive: true, force: true });
    throw new Error(`Chromium (${CHROMIUM}) did not start: ${(err as Error).message}`);
  }
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(20_000);
  const dialogs: string[] = [];
  const problems: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  page.on('pageerror', (e) => problems.push(`pageerror: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && /Content Security Policy|Refused to/i.test(m.text())) problems.push(m.text());
  });
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    page,
    context,
    dialogs,
    problems,
    screenshot: async (name) => {
      await page.screenshot({ path: new URL(`${name}.png`, ARTIFACTS).pathname, fullPage: true });
    },
    close: async () => {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
