/** A table of operations: the key links to the operation's page; everything is text. */
import type { Operation } from '../api.js';
import { h } from '../dom.js';
import { text } from '../format.js';
import { opHash } from './context.js';

export interface Column {
  label: string;
  value(op: Operation): string;
}

/** The preview an agent runtime put in metadata, if any (untrusted text). */
export const preview = (op: Operation) => text(op.metadata.preview);

export function opTable(caption: string, ops: Operation[], extra: Column[]): HTMLElement {
  const head = h(
    'tr',
    {},
    h('th', { scope: 'col' }, 'Key'),
    h('th', { scope: 'col' }, 'Scope'),
    h('th', { scope: 'col' }, 'Effect'),
    h('th', { scope: 'col' }, 'Attempt'),
    ...extra.map((c) => h('th', { scope: 'col' }, c.label)),
    h('th', { scope: 'col' }, 'Preview'),
  );
  const rows = ops.map((op) =>
    h(
      'tr',
      {},
      h('td', { class: 'key' }, h('a', { href: opHash(op.scope, op.key) }, op.key)),
      h('td', {}, op.scope),
      h('td', {}, op.effect),
      h('td', { class: 'num' }, op.attempt),
      ...extra.map((c) => h('td', {}, c.value(op))),
      h('td', { class: 'preview' }, preview(op)),
    ),
  );
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', {}, head),
      h('tbody', {}, ...rows),
    ),
  );
}
