/** The operation page: every field, the JSON as text, the events timeline, and the controls. */
import { ApiError, type Operation, type OperationEvent } from '../api.js';
import { fields, h, notice, replace } from '../dom.js';
import { json, relative, text, when } from '../format.js';
import { type Ctx, opHash, type View } from './context.js';
import { controls, type Flash } from './controls.js';

export type Target = { scope: string; key: string } | { id: string };

/** A timestamp with a live "in 12 s" / "3 min ago" beside it (updated by the page's timer). */
function deadline(iso: string | null | undefined): HTMLElement | string {
  if (!iso) return '—';
  return h(
    'span',
    {},
    h('time', { datetime: iso }, when(iso)),
    ' (',
    h('span', { 'data-relative': iso }, relative(iso)),
    ')',
  );
}

const pre = (label: string, value: unknown) =>
  h(
    'figure',
    { class: 'json' },
    h('figcaption', {}, label),
    h('pre', { tabindex: '0', 'aria-label': label }, json(value)),
  );

function details(op: Operation): HTMLElement[] {
  const m = op.metadata;
  const out: HTMLElement[] = [
    fields([
      ['Scope', op.scope],
      ['Key', h('span', { class: 'key' }, op.key)],
      ['ID', h('code', {}, op.id)],
      ['Status', h('strong', { class: `status status-${op.status}` }, op.status)],
      ['Effect', op.effect],
      ['Attempt', op.attempt],
      ['Fingerprint', h('code', { class: 'fingerprint' }, op.fingerprint)],
      ['Created', deadline(op.createdAt)],
      ['Updated', deadline(op.updatedAt)],
      ['Completed', deadline(op.completedAt)],
      ['Retained until', deadline(op.retainedUntil)],
    ]),
    h('h2', {}, 'Lease'),
    op.lease
      ? fields([
          ['Owner', op.lease.owner],
          ['Dispatched', deadline(op.lease.dispatchedAt)],
          ['Expires', deadline(op.lease.expiresAt)],
        ])
      : h('p', {}, 'No lease.'),
    h('h2', {}, 'Approval'),
    op.approval
      ? fields([
          ['State', op.approval.state],
          ['Deadline', deadline(op.approval.deadline)],
          ['Decided by', op.approval.decidedBy],
          ['Decided', deadline(op.approval.decidedAt)],
          ['Note', op.approval.note],
        ])
      : h('p', {}, 'No approval required.'),
    h('h2', {}, 'Resolution'),
    op.resolution
      ? fields([
          ['By', op.resolution.by],
          ['At', deadline(op.resolution.at)],
          ['Note', op.resolution.note],
        ])
      : h('p', {}, 'Not resolved by an operator.'),
    h('h2', {}, 'Metadata'),
    fields([
      ['Tool', text(m.tool) || null],
      ['Session', text(m.sessionId) || null],
      ['Turn', text(m.turnId) || null],
      ['Call', text(m.toolCallId ?? m.callId) || null],
      ['Preview', text(m.preview) ? h('span', { class: 'preview' }, text(m.preview)) : null],
    ]),
    pre('Metadata JSON', m),
    h('h2', {}, 'Request and result'),
    pre('Request JSON', op.request),
    pre('Result JSON', op.result),
  ];
  return out;
}

function timeline(events: OperationEvent[]): HTMLElement {
  if (events.length === 0) return h('p', {}, 'No events.');
  return h(
    'ol',
    { class: 'timeline' },
    ...events.map((e) =>
      h(
        'li',
        {},
        h('time', { datetime: e.at }, when(e.at)),
        ' ',
        h('strong', {}, e.type),
        ` by ${e.actor}, attempt ${e.attempt}`,
        Object.keys(e.detail).length ? h('pre', {}, json(e.detail)) : null,
      ),
    ),
  );
}

export function operationView(ctx: Ctx, target: Target, first?: Flash): View {
  const flashBox = h('div', {});
  const body = h('div', { 'aria-busy': 'true' }, h('p', {}, 'Loading…'));
  const title = h('h1', { id: 'view-title', tabindex: '-1' }, 'Operation');
  const reload = h('button', { type: 'button', onclick: () => void load() }, 'Reload operation');
  const el = h('section', { 'aria-labelledby': 'view-title' }, title, flashBox, reload, body);
  // Lease and approval countdowns tick here; nothing else on this page changes by itself,
  // so a half-written note is never redrawn under the operator.
  const timer = setInterval(() => {
    for (const span of body.querySelectorAll<HTMLElement>('[data-relative]')) {
      span.textContent = relative(span.dataset.relative);
    }
  }, 1000);

  async function load(flash?: Flash): Promise<void> {
    // The outcome of an action is announced with the operation as it now is, never over
    // the page it replaces: the flash appears once the reload has drawn the new state.
    replace(flashBox, null);
    body.setAttribute('aria-busy', 'true');
    try {
      const op =
        'id' in target ? await ctx.api.getById(target.id) : await ctx.api.get(target.scope, target.key);
      const events = await ctx.api.events(op.scope, op.key);
      replace(title, 'Operation ', h('span', { class: 'key' }, op.key));
      const ctl = controls(ctx, op, (f) => void load(f));
      replace(
        body,
        ctl,
        ctx.role === 'operator'
          ? null
          : h('p', { class: 'hint' }, 'Read-only: this key cannot approve, reject or resolve.'),
        ...details(op),
        h('h2', {}, 'Events'),
        timeline(events),
      );
      if ('id' in target) history.replaceState(null, '', opHash(op.scope, op.key));
    } catch (err) {
      const text =
        err instanceof ApiError && err.status === 404
          ? 'No such operation (or this key may not see it).'
          : `Could not load the operation: ${(err as Error).message}`;
      replace(body, notice('alert', text));
    } finally {
      body.setAttribute('aria-busy', 'false');
    }
    if (flash) replace(flashBox, notice(flash.kind, flash.text));
    const shown = flashBox.firstElementChild as HTMLElement | null;
    if (shown) {
      shown.tabIndex = -1;
      shown.focus();
    }
  }

  void load(first);
  return { el, dispose: () => clearInterval(timer) };
}
