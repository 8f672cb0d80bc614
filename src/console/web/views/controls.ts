/**
 * The operator's three controls. Approve sends the fingerprint shown; resolve
 * sends the attempt shown as expectedAttempt. A 409 (someone else acted first)
 * is reported plainly and the operation reloads to show what happened.
 */
import { ApiError, type Operation } from '../api.js';
import { h, notice, replace } from '../dom.js';
import { now, text } from '../format.js';
import type { Ctx } from './context.js';

/** What the page shows after an action: a confirmation, or why it failed. */
export interface Flash {
  kind: 'alert' | 'status';
  text: string;
}

type Done = (flash: Flash) => void;

/** Runs one action; a 409 reloads the page, any other failure stays in the form. */
async function act(
  form: HTMLFormElement,
  message: HTMLElement,
  run: () => Promise<Operation>,
  ok: (op: Operation) => string,
  done: Done,
): Promise<void> {
  for (const b of form.querySelectorAll('button')) b.disabled = true;
  try {
    done({ kind: 'status', text: ok(await run()) });
  } catch (err) {
    if (err instanceof ApiError && err.conflict) {
      done({
        kind: 'alert',
        text: `Someone else acted first (409 ${err.code}): ${err.message}. The operation was reloaded to show its current state.`,
      });
      return;
    }
    const why =
      err instanceof ApiError ? `${err.status} ${err.code}: ${err.message}` : (err as Error).message;
    replace(message, notice('alert', `Not done: ${why}`));
    for (const b of form.querySelectorAll('button')) b.disabled = false;
  }
}

function textarea(
  id: string,
  label: string,
  required: boolean,
  hint?: string,
): [HTMLElement, HTMLTextAreaElement] {
  const area = h('textarea', {
    id,
    name: id,
    rows: 3,
    required,
    'aria-describedby': hint ? `${id}-hint` : null,
  });
  return [
    h(
      'div',
      { class: 'field' },
      h('label', { for: id }, label),
      hint ? h('p', { id: `${id}-hint`, class: 'hint' }, hint) : null,
      area,
    ),
    area,
  ];
}

function approvalControls(ctx: Ctx, op: Operation, done: Done): HTMLElement {
  const message = h('div', {});
  const [approveNote, approveArea] = textarea('approve-note', 'Approval note (optional)', false);
  const approve = h(
    'form',
    { class: 'control', 'aria-label': 'Approve' },
    h(
      'p',
      {},
      'You approve exactly this request. Preview: ',
      h('q', { class: 'preview' }, text(op.metadata.preview) || '(none)'),
    ),
    h('p', {}, 'Fingerprint approved: ', h('code', { class: 'fingerprint' }, op.fingerprint)),
    approveNote,
    h('button', { type: 'submit' }, 'Approve'),
  );
  approve.addEventListener('submit', (e) => {
    e.preventDefault();
    void act(
      approve,
      message,
      () => ctx.api.approve(op, approveArea.value.trim() || undefined),
      () => 'Approved.',
      done,
    );
  });
  const [rejectNote, rejectArea] = textarea(
    'reject-note',
    'Rejection note',
    true,
    'Required: why it must not run.',
  );
  const reject = h(
    'form',
    { class: 'control', 'aria-label': 'Reject', novalidate: true },
    rejectNote,
    h('button', { type: 'submit', class: 'danger' }, 'Reject'),
  );
  reject.addEventListener('submit', (e) => {
    e.preventDefault();
    const note = rejectArea.value.trim();
    if (!note) {
      replace(message, notice('alert', 'A rejection needs a note.'));
      rejectArea.focus();
      return;
    }
    void act(
      reject,
      message,
      () => ctx.api.reject(op, note),
      () => 'Rejected.',
      done,
    );
  });
  return h(
    'section',
    { 'aria-labelledby': 'h-approval-controls', class: 'controls' },
    h('h2', { id: 'h-approval-controls' }, 'Approve or reject'),
    approve,
    reject,
    message,
  );
}

function resolveControls(ctx: Ctx, op: Operation, done: Done): HTMLElement {
  const message = h('div', {});
  const radios = (['succeeded', 'failed', 'ready'] as const).map((v, i) =>
    h(
      'label',
      { class: 'radio' },
      h('input', { type: 'radio', name: 'resolve-status', value: v, checked: i === 0 }),
      ` ${v}`,
    ),
  );
  const [noteField, noteArea] = textarea(
    'resolve-note',
    'Resolution note',
    true,
    'Required: what you checked downstream.',
  );
  const [resultField, resultArea] = textarea(
    'resolve-result',
    'Result JSON (optional)',
    false,
    'Stored as the result for succeeded or failed.',
  );
  const form = h(
    'form',
    { class: 'control', 'aria-label': 'Resolve', novalidate: true },
    h('fieldset', {}, h('legend', {}, 'Resolve as'), ...radios),
    noteField,
    resultField,
    h(
      'p',
      { class: 'hint' },
      `Sent with expectedAttempt ${op.attempt} (the attempt shown): if it has moved on, nothing changes.`,
    ),
    h('button', { type: 'submit' }, 'Resolve'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const status = (new FormData(form).get('resolve-status') ?? 'succeeded') as
      | 'succeeded'
      | 'failed'
      | 'ready';
    const note = noteArea.value.trim();
    if (!note) {
      replace(message, notice('alert', 'A resolution needs a note.'));
      noteArea.focus();
      return;
    }
    let result: { value: unknown } | null = null;
    if (resultArea.value.trim()) {
      try {
        result = { value: JSON.parse(resultArea.value) };
      } catch {
        replace(message, notice('alert', 'The result is not valid JSON.'));
        resultArea.focus();
        return;
      }
    }
    void act(
      form,
      message,
      () => ctx.api.resolve(op, status, note, result),
      (o) => `Resolved: the operation is now ${o.status}.`,
      done,
    );
  });
  return h(
    'section',
    { 'aria-labelledby': 'h-resolve-controls', class: 'controls' },
    h('h2', { id: 'h-resolve-controls' }, 'Resolve'),
    form,
    message,
  );
}

/** The controls this operation admits for this key, or null (a client key gets none). */
export function controls(ctx: Ctx, op: Operation, done: Done): HTMLElement | null {
  if (ctx.role !== 'operator') return null;
  if (op.status === 'pending_approval') return approvalControls(ctx, op, done);
  const expired = op.status === 'in_progress' && op.lease !== null && Date.parse(op.lease.expiresAt) <= now();
  if (op.status === 'outcome_unknown' || expired) return resolveControls(ctx, op, done);
  return null;
}
