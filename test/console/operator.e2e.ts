/**
 * An operator in real Chromium: signs in, sees what needs attention, resolves
 * an outcome_unknown operation, approves a pending one, loses a resolve race
 * (409, then the reload), and untrusted text stays inert throughout.
 */
import type { Locator } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { expireLease } from '../support/http.js';
import type { RunningService } from '../support/service.js';
import { type Browser, describeBrowser, launch } from './browser.js';
import { as, SECRETS, seedPending, seedUnknown, startConsoleService, XSS } from './fixtures.js';

const UNKNOWN_KEY = `${XSS.img}/turn-1/call-1`;
const RACE_KEY = 'session-9/turn-2/call-3';
const PENDING_KEY = 'session-9/turn-1/call-2';
const PENDING_PREVIEW = `Refund 30 EUR to ${XSS.script}`;
const RESULT = `{"ticket":"${XSS.img}"}`;

let svc: RunningService;
let b: Browser;

/** Waits until the locator is visible, then answers its text. */
async function shown(l: Locator): Promise<string> {
  await l.waitFor({ state: 'visible' });
  return (await l.textContent()) ?? '';
}

describeBrowser('operator console', () => {
  beforeAll(async () => {
    svc = await startConsoleService();
    const agent = as(svc, 'agent-7');
    await seedUnknown(agent, UNKNOWN_KEY, { metadata: { tool: 'ticket', preview: XSS.script } });
    await seedUnknown(agent, RACE_KEY);
    await seedPending(agent, PENDING_KEY, PENDING_PREVIEW);
    const idem = await agent.begin({
      key: 'session-9/turn-3/call-4',
      request: { n: 4 },
      effect: 'idempotent_write',
      owner: 'worker-3',
    });
    expect(idem.status).toBe(201);
    await expireLease(svc.db, 'orders', 'session-9/turn-3/call-4');
    b = await launch();
    // Page timers run on a clock the test moves: auto-refresh is exercised without waiting.
    await b.page.clock.install();
  });
  afterAll(async () => {
    await b?.close();
    await svc?.close();
  });

  it('signs in with the keyboard and shows the overview per scope, with the chart', async () => {
    const { page } = b;
    await page.goto(`${svc.url}/console`);
    await shown(page.getByRole('heading', { name: 'Idem console: sign in' }));
    // Focus starts in the key field; Enter submits.
    await page.keyboard.type(SECRETS['ops-alice']!);
    await page.keyboard.press('Enter');
    await shown(page.getByRole('heading', { name: 'Overview' }));
    expect(await shown(page.getByText('Operator key'))).toBe('Operator key');
    const cells = page.getByRole('row', { name: /^orders/ }).getByRole('cell');
    await cells.first().waitFor();
    // pending_approval, ready, in_progress, outcome_unknown, oldest unknown age.
    expect((await cells.allTextContents()).slice(0, 4)).toEqual(['1', '0', '1', '2']);
    expect(await cells.nth(4).textContent()).toMatch(/^\d+ s$/);
    const chart = page.getByRole('img', { name: /Open operations over the last 6 hours/ });
    expect(await chart.getAttribute('aria-label')).toContain('outcome_unknown: 0 6 h ago, 2 now');
    expect(await chart.getAttribute('aria-label')).toContain('pending_approval: 0 6 h ago, 1 now');
    await b.screenshot('overview');
  });

  it('auto-refreshes the overview', async () => {
    const { page } = b;
    await seedUnknown(as(svc, 'agent-7'), 'session-9/turn-4/call-5');
    await page.clock.runFor(16_000);
    // The outcome_unknown column now counts the operation seeded after the page loaded.
    await page.getByRole('row', { name: /^orders 1 0 1 3 / }).waitFor();
  });

  it('lists what needs attention: unknown oldest first, expired leases, pending by deadline', async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await shown(page.getByRole('heading', { name: 'Needs attention', level: 1 }));
    const unknown = page.getByRole('region', { name: 'Outcome unknown' });
    await unknown.getByRole('link').first().waitFor();
    expect(await unknown.getByRole('link').allTextContents()).toEqual([
      UNKNOWN_KEY,
      RACE_KEY,
      'session-9/turn-4/call-5',
    ]);
    const expired = page.getByRole('region', { name: 'Expired leases' });
    expect(await shown(expired.getByRole('link'))).toBe('session-9/turn-3/call-4');
    expect(await shown(expired.getByRole('cell', { name: 'worker-3' }))).toBe('worker-3');
    const pending = page.getByRole('region', { name: 'Pending approval' });
    expect(await shown(pending.getByRole('link'))).toBe(PENDING_KEY);
    expect(await shown(pending.getByText(PENDING_PREVIEW))).toBe(PENDING_PREVIEW);
    await b.screenshot('needs-attention');
  });

  it('filters the queue by status and effect', async () => {
    const { page } = b;
    await page.getByLabel('Status').selectOption('outcome_unknown');
    await page.getByLabel('Effect').selectOption('non_idempotent_write');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('region', { name: 'Outcome unknown' }).getByRole('link').first().waitFor();
    expect(await page.getByRole('region', { name: 'Pending approval' }).count()).toBe(0);
    await page.getByLabel('Effect').selectOption('read');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await shown(page.getByRole('region', { name: 'Outcome unknown' }).getByText('None.'));
    // Everything here was created seconds ago: nothing is older than 5 minutes.
    await page.getByLabel('Effect').selectOption('');
    await page.getByLabel('Created more than').selectOption('5 min');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await shown(page.getByRole('region', { name: 'Outcome unknown' }).getByText('None.'));
    await page.getByLabel('Created more than').selectOption('any age');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.getByRole('region', { name: 'Outcome unknown' }).getByRole('link').first().waitFor();
  });

  it('pages the queue with the keyset cursor, oldest first', async () => {
    const { page } = b;
    const bulk = as(svc, 'ops-alice', 'bulk');
    for (let i = 0; i < 55; i++) await seedUnknown(bulk, `bulk-${String(i).padStart(2, '0')}`);
    await page.getByLabel('Scope').fill('bulk');
    await page.getByLabel('Effect').selectOption('');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    const links = page.getByRole('region', { name: 'Outcome unknown' }).getByRole('link');
    await links.first().waitFor();
    expect(await links.count()).toBe(50);
    await page.getByRole('button', { name: 'More outcome unknown' }).click();
    await links.nth(54).waitFor();
    const keys = await links.allTextContents();
    expect(keys).toEqual(Array.from({ length: 55 }, (_, i) => `bulk-${String(i).padStart(2, '0')}`));
    expect(await page.getByRole('button', { name: 'More outcome unknown' }).count()).toBe(0);
  });

  it('resolves an outcome_unknown operation with a note and a result; its text stays text', async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('link', { name: UNKNOWN_KEY, exact: true }).click();
    await shown(page.getByRole('heading', { name: `Operation ${UNKNOWN_KEY}` }));
    // The key, the preview and the request are on the page as literal text.
    expect(await shown(page.getByText(XSS.script, { exact: true }))).toBe(XSS.script);
    await shown(page.getByRole('region', { name: 'Resolve' }));
    await b.screenshot('operation-unknown');

    await page.getByRole('radio', { name: 'succeeded' }).check();
    await page.getByLabel('Resolution note').fill('ticket found downstream');
    await page.getByLabel('Result JSON (optional)').fill(RESULT);
    await page.getByRole('button', { name: 'Resolve' }).click();
    expect(await shown(page.getByRole('status'))).toBe('Resolved: the operation is now succeeded.');
    expect(await shown(page.getByLabel('Result JSON', { exact: true }))).toContain(XSS.img);
    expect(await shown(page.getByText('ticket found downstream', { exact: true }))).toBe(
      'ticket found downstream',
    );
    expect(await page.getByRole('button', { name: 'Resolve' }).count()).toBe(0);

    const stored = (await as(svc, 'ops-alice').get(UNKNOWN_KEY)).body.operation;
    expect(stored.status).toBe('succeeded');
    expect(stored.resolution).toMatchObject({ by: 'ops-alice', note: 'ticket found downstream' });
    expect(stored.result).toEqual({ ticket: XSS.img });
    expect(await page.locator('img').count()).toBe(0);
    await b.screenshot('operation-resolved');
  });

  it('approves a pending operation, bound to the fingerprint shown', async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('link', { name: PENDING_KEY, exact: true }).click();
    const fingerprint = (await as(svc, 'ops-alice').get(PENDING_KEY)).body.operation.fingerprint;
    const approve = page.getByRole('form', { name: 'Approve' });
    expect(await shown(approve.getByText(fingerprint))).toBe(fingerprint);
    expect(await shown(approve.getByText(PENDING_PREVIEW))).toBe(PENDING_PREVIEW);
    await b.screenshot('operation-pending');
    await page.getByLabel('Approval note (optional)').fill('refund ok');
    await page.getByRole('button', { name: 'Approve' }).click();
    expect(await shown(page.getByRole('status'))).toBe('Approved.');
    const stored = (await as(svc, 'ops-alice').get(PENDING_KEY)).body.operation;
    expect(stored.status).toBe('ready');
    expect(stored.approval).toMatchObject({ state: 'approved', decidedBy: 'ops-alice', note: 'refund ok' });
  });

  it('loses a resolve race: shows the 409 plainly and reloads to what the other operator did', async () => {
    const { page } = b;
    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Scope').fill('orders');
    await page.getByLabel('Key (exact)').fill(RACE_KEY);
    await b.screenshot('search');
    await page.getByRole('button', { name: 'Find by key' }).click();
    await shown(page.getByRole('heading', { name: `Operation ${RACE_KEY}` }));
    await page.getByLabel('Resolution note').fill('I think it ran');

    // Another operator settles it between this page's load and the click.
    const bob = await as(svc, 'ops-bob').resolve(RACE_KEY, {
      status: 'failed',
      note: 'bob: it never ran',
      expectedAttempt: 1,
    });
    expect(bob.status).toBe(200);
    await page.getByRole('button', { name: 'Resolve' }).click();

    const alert = await shown(page.getByRole('alert'));
    expect(alert).toContain('Someone else acted first (409');
    expect(alert).toContain('reloaded');
    expect(await shown(page.getByText('bob: it never ran', { exact: true }))).toBe('bob: it never ran');
    expect(await page.getByRole('button', { name: 'Resolve' }).count()).toBe(0);
    const stored = (await as(svc, 'ops-alice').get(RACE_KEY)).body.operation;
    expect(stored).toMatchObject({
      status: 'failed',
      resolution: { by: 'ops-bob', note: 'bob: it never ran' },
    });
    await b.screenshot('operation-race-lost');
  });

  it('rejects a pending operation only with a note', async () => {
    const { page } = b;
    await seedPending(as(svc, 'agent-7'), 'session-9/turn-5/call-6', 'wire 9000 EUR');
    await page.getByRole('link', { name: 'Needs attention' }).click();
    await page.getByRole('link', { name: 'session-9/turn-5/call-6', exact: true }).click();
    await page.getByRole('button', { name: 'Reject' }).click();
    expect(await shown(page.getByRole('alert'))).toBe('A rejection needs a note.');
    expect((await as(svc, 'ops-alice').get('session-9/turn-5/call-6')).body.operation.status).toBe(
      'pending_approval',
    );
    await page.getByLabel('Rejection note').fill('wrong customer');
    await page.getByRole('button', { name: 'Reject' }).click();
    expect(await shown(page.getByRole('status'))).toBe('Rejected.');
    const stored = (await as(svc, 'ops-alice').get('session-9/turn-5/call-6')).body.operation;
    expect(stored).toMatchObject({
      status: 'rejected',
      approval: { state: 'rejected', decidedBy: 'ops-alice' },
    });
  });

  it('opened no dialog and broke no Content-Security-Policy rule', () => {
    expect(b.dialogs).toEqual([]);
    expect(b.problems).toEqual([]);
  });
});
