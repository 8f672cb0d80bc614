/**
 * Needs attention: outcome_unknown oldest first, then in_progress whose lease
 * expired, then pending_approval nearest its deadline. Each section pages with
 * the API's keyset cursor ("More ..." loads the next page).
 */
import { EFFECTS, type Operation } from '../api.js';
import { h, notice, replace } from '../dom.js';
import { age, now, relative, when } from '../format.js';
import type { Ctx, View } from './context.js';
import { type Column, opTable } from './op-table.js';

export interface Filters {
  scope?: string;
  status?: string;
  effect?: string;
  /** Created more than this many minutes ago. */
  age?: string;
}

interface SectionDef {
  id: string;
  title: string;
  status: Operation['status'];
  keep(ops: Operation[]): Operation[];
  columns: Column[];
  /** Rows per request: the expired-lease section filters live leases out here, so it asks for more. */
  page: number;
}

const PAGE = 50;

const SECTIONS: SectionDef[] = [
  {
    id: 'outcome_unknown',
    title: 'Outcome unknown',
    status: 'outcome_unknown',
    keep: (ops) => ops,
    page: PAGE,
    columns: [
      { label: 'Unknown for', value: (op) => age(op.updatedAt) },
      { label: 'Created', value: (op) => `${age(op.createdAt)} ago` },
    ],
  },
  {
    id: 'in_progress',
    title: 'Expired leases',
    status: 'in_progress',
    keep: (ops) => ops.filter((op) => op.lease !== null && Date.parse(op.lease.expiresAt) <= now()),
    page: 500,
    columns: [
      { label: 'Lease expired', value: (op) => relative(op.lease?.expiresAt) },
      { label: 'Owner', value: (op) => op.lease?.owner ?? '—' },
    ],
  },
  {
    id: 'pending_approval',
    title: 'Pending approval',
    status: 'pending_approval',
    keep: (ops) =>
      [...ops].sort(
        (a, b) => Date.parse(a.approval?.deadline ?? '') - Date.parse(b.approval?.deadline ?? ''),
      ),
    page: PAGE,
    columns: [
      { label: 'Deadline', value: (op) => relative(op.approval?.deadline) },
      { label: 'Waiting', value: (op) => age(op.createdAt) },
    ],
  },
];

const AGES: [string, string][] = [
  ['', 'any age'],
  ['5', '5 min'],
  ['60', '1 h'],
  ['360', '6 h'],
  ['1440', '24 h'],
];

function select(id: string, label: string, options: [string, string][], value = ''): HTMLElement[] {
  // Ids are f-<name>; the name is the filter's query parameter.
  const el = h('select', { id, name: id.slice(2) });
  for (const [v, text] of options) el.append(h('option', { value: v, selected: v === value }, text));
  return [h('label', { for: id }, label), el];
}

function filterForm(ctx: Ctx, f: Filters): HTMLFormElement {
  const form = h(
    'form',
    { class: 'filters', 'aria-label': 'Filters' },
    h(
      'div',
      {},
      h('label', { for: 'f-scope' }, 'Scope'),
      h('input', { id: 'f-scope', name: 'scope', value: f.scope ?? '' }),
    ),
    h(
      'div',
      {},
      ...select(
        'f-status',
        'Status',
        [['', 'all three'], ...SECTIONS.map((s): [string, string] => [s.id, s.id])],
        f.status,
      ),
    ),
    h(
      'div',
      {},
      ...select(
        'f-effect',
        'Effect',
        [['', 'any'], ...EFFECTS.map((e): [string, string] => [e, e])],
        f.effect,
      ),
    ),
    h('div', {}, ...select('f-age', 'Created more than', AGES, f.age)),
    h('button', { type: 'submit' }, 'Apply filters'),
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const params = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (typeof v === 'string' && v.trim()) params.set(k, v.trim());
    ctx.go(`#/attention?${params}`);
  });
  return form;
}

/** One section: its loaded items and the cursor of the next page. */
function section(ctx: Ctx, def: SectionDef, f: Filters) {
  let items: Operation[] = [];
  let cursor: string | null = null;
  let pages = 1;
  const body = h('div', { 'aria-busy': 'true' }, h('p', {}, 'Loading…'));
  const el = h(
    'section',
    { 'aria-labelledby': `h-${def.id}` },
    h('h2', { id: `h-${def.id}` }, def.title),
    body,
  );

  const query = (c?: string) => ({
    status: def.status,
    scope: f.scope,
    effect: f.effect as Operation['effect'] | undefined,
    createdBefore: f.age ? new Date(now() - Number(f.age) * 60_000).toISOString() : undefined,
    limit: def.page,
    cursor: c,
  });

  function render(): void {
    const shown = def.keep(items);
    const more = cursor
      ? h('button', { type: 'button', onclick: () => void next() }, `More ${def.title.toLowerCase()}`)
      : null;
    replace(
      body,
      shown.length ? opTable(def.title, shown, def.columns) : h('p', {}, 'None.'),
      h('p', { class: 'hint' }, `${shown.length} shown${cursor ? '; more exist' : ''}.`),
      more,
    );
    body.setAttribute('aria-busy', 'false');
  }

  async function next(): Promise<void> {
    try {
      const r = await ctx.api.list(query(cursor ?? undefined));
      items = items.concat(r.items);
      cursor = r.nextCursor;
      pages++;
      render();
      body.querySelector('button')?.focus();
    } catch (err) {
      body.append(notice('alert', `Could not load more: ${(err as Error).message}`));
    }
  }

  /** Loads as many pages as the operator has opened, from the first. */
  async function load(): Promise<void> {
    try {
      let all: Operation[] = [];
      let c: string | null = null;
      for (let i = 0; i < pages; i++) {
        const r = await ctx.api.list(query(c ?? undefined));
        all = all.concat(r.items);
        c = r.nextCursor;
        if (!c) break;
      }
      items = all;
      cursor = c;
      render();
    } catch (err) {
      replace(body, notice('alert', `Could not load ${def.title.toLowerCase()}: ${(err as Error).message}`));
    }
  }

  return { el, body, load };
}

export function attentionView(ctx: Ctx, f: Filters): View {
  const defs = SECTIONS.filter((d) => !f.status || d.id === f.status);
  const sections = defs.map((d) => section(ctx, d, f));
  const updated = h('p', { class: 'hint' });
  const el = h(
    'section',
    { 'aria-labelledby': 'view-title' },
    h('h1', { id: 'view-title', tabindex: '-1' }, 'Needs attention'),
    filterForm(ctx, f),
    updated,
    ...sections.map((s) => s.el),
  );
  async function refresh(): Promise<void> {
    // Replacing a list under the operator's focus would lose their place: wait for the next tick.
    const active = document.activeElement;
    if (active && sections.some((s) => s.body.contains(active))) return;
    await Promise.all(sections.map((s) => s.load()));
    updated.textContent = `Updated ${when(new Date(now()).toISOString())}`;
  }
  void refresh();
  return { el, refresh };
}
