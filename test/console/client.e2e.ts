/**
 * A client key in real Chromium: a read-only view of its own scopes, no
 * controls anywhere; a wrong key is refused; the key stays in sessionStorage
 * (never a URL, a cookie or a log line); the page works in a narrow window.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { LOG_REDACT } from '../../src/http/app.js';
import { type RunningService, startService } from '../support/service.js';
import { type Browser, describeBrowser, launch } from './browser.js';
import { as, KEYS, SECRETS, seedPending, seedUnknown, XSS } from './fixtures.js';

const UNKNOWN_KEY = `orders/${XSS.script}`;
const PENDING_KEY = 'session-1/turn-1/call-1';

let svc: RunningService;
let b: Browser;
const logLines: string[] = [];

async function shown(l: Locator): Promise<string> {
  await l.waitFor({ state: 'visible' });
  return (await l.textContent()) ?? '';
}

describeBrowser('client (read-only) console', () => {
  beforeAll(async () => {
    // The service logs as in production (redaction on), into memory, to prove the key never lands there.
    const sink = new Writable({
      write(chunk, _enc, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    const logger = pino({ level: 'info', redact: { paths: LOG_REDACT, censor: '[redacted]' } }, sink);
    svc = await startService({ keys: KEYS, logger });
    const agent = as(svc, 'agent-7');
    await seedUnknown(agent, UNKNOWN_KEY, { metadata: { preview: XSS.img } });
    await seedPending(agent, PENDING_KEY, `delete ${XSS.img}`);
    // Another tenant's operation: the client key must not see it anywhere.
    await seedUnknown(as(svc, 'ops-alice', 'bank'), 'vault/1');
    b = await launch();
  });
  afterAll(async () => {
    await b?.close();
    await svc?.close();
  });

  it('refuses a wrong key plainly', async () => {
    const { page } = b;
    await page.goto(`${svc.url}/console/`);
    await page.getByLabel('API key').fill('idem_not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await shown(page.getByRole('alert'))).toBe('This key was not accepted (401).');
    await b.screenshot('sign-in-refused');
  });

  it('signs in read-only: the overview counts only its own scopes', async () => {
    const { page } = b;
    await page.getByLabel('API key').fill(SECRETS['agent-7']!);
    await page.getByRole('button', { name: 'Sign in' }).click();
    expect(await shown(page.getByText('Client key (read-only)'))).toBe('Client key (read-only)');
    const cells = page.getByRole('row', { name: /^orders/ }).getByRole('cell');
    await cells.first().waitFor();
    expect((await cells.allTextContents()).slice(0, 4)).toEqual(['1', '0', '0', '1']);
    expect(await page.getByRole('row', { name: /^bank/ }).count()).toBe(0);
    await b.screenshot('overview-client');
  });

  it('shows an operation without any control, its untrusted text as text', async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('link', { name: UNKNOWN_KEY, exact: true }).click();
    await shown(page.getByRole('heading', { name: `Operation ${UNKNOWN_KEY}` }));
    expect(
      await shown(page.getByText('Read-only: this key cannot approve, reject or resolve.')),
    ).toBeTruthy();
    expect(await shown(page.getByText(XSS.img, { exact: true }))).toBe(XSS.img);
    for (const name of ['Resolve', 'Approve', 'Reject']) {
      expect(await page.getByRole('button', { name }).count()).toBe(0);
    }
    expect(await page.getByRole('textbox').count()).toBe(0);
    await b.screenshot('operation-read-only');

    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('link', { name: PENDING_KEY, exact: true }).click();
    await shown(page.getByRole('heading', { name: `Operation ${PENDING_KEY}` }));
    expect(await shown(page.getByText(`delete ${XSS.img}`, { exact: true }))).toBeTruthy();
    for (const name of ['Resolve', 'Approve', 'Reject']) {
      expect(await page.getByRole('button', { name }).count()).toBe(0);
    }
  });

  it('finds an operation by id; another tenant’s id reads as missing', async () => {
    const { page } = b;
    const own = (await as(svc, 'agent-7').get(UNKNOWN_KEY)).body.operation.id;
    const foreign = (await as(svc, 'ops-alice', 'bank').get('vault/1')).body.operation.id;
    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Operation ID').fill(foreign);
    await page.getByRole('button', { name: 'Find by ID' }).click();
    expect(await shown(page.getByRole('alert'))).toBe('No such operation (or this key may not see it).');
    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Operation ID').fill(own);
    await page.getByRole('button', { name: 'Find by ID' }).click();
    await shown(page.getByRole('heading', { name: `Operation ${UNKNOWN_KEY}` }));
  });

  it('works in a narrow window without horizontal scrolling of the page', async () => {
    const { page } = b;
    await page.setViewportSize({ width: 390, height: 844 });
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('region', { name: 'Outcome unknown' }).getByRole('link').first().waitFor();
    expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
    await b.screenshot('needs-attention-narrow');
    await page.setViewportSize({ width: 1280, height: 800 });
  });

  it('keeps the key in sessionStorage only, and forgets it on sign-out', async () => {
    const { page, context } = b;
    const secret = SECRETS['agent-7']!;
    expect(page.url()).not.toContain(secret);
    expect(await context.cookies()).toEqual([]);
    expect(await page.evaluate("sessionStorage.getItem('idem.console.apiKey')")).toBe(secret);
    expect(await page.evaluate('localStorage.length')).toBe(0);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('')).not.toContain(secret);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await shown(page.getByRole('heading', { name: 'Idem console: sign in' }));
    expect(await page.evaluate("sessionStorage.getItem('idem.console.apiKey')")).toBeNull();
  });

  it('opened no dialog and broke no Content-Security-Policy rule', () => {
    expect(b.dialogs).toEqual([]);
    expect(b.problems).toEqual([]);
  });
});
