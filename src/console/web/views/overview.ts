/** Overview: per scope, counts by open status and the oldest unknown; the chart; auto-refreshed. */
import type { Api, Operation, ScopeStats } from '../api.js';
import { CHART_HOURS, chart, seriesFor } from '../chart.js';
import { h, notice, replace } from '../dom.js';
import { duration, now, when } from '../format.js';
import type { Ctx, View } from './context.js';

const OPEN = ['pending_approval', 'ready', 'in_progress', 'outcome_unknown'] as const;
const PAGE = 500;
const MAX_PAGES = 4;

/** Every operation of one status, up to MAX_PAGES pages; `complete` says whether that was all. */
export async function listAll(
  api: Api,
  status: string,
  scope?: string,
): Promise<{ items: Operation[]; complete: boolean }> {
  const items: Operation[] = [];
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const r = await api.list({ status: status as Operation['status'], scope, limit: PAGE, cursor });
    items.push(...r.items);
    if (!r.nextCursor) return { items, complete: true };
    cursor = r.nextCursor;
  }
  return { items, complete: false };
}

/** What /v1/stats answers, computed from list data for a client key (stats is operator-only). */
function statsFromLists(lists: Record<string, Operation[]>): ScopeStats[] {
  const byScope = new Map<string, ScopeStats>();
  for (const [status, ops] of Object.entries(lists)) {
    for (const op of ops) {
      const st = byScope.get(op.scope) ?? { scope: op.scope, counts: {}, oldestOutcomeUnknownAgeMs: null };
      st.counts[status] = (st.counts[status] ?? 0) + 1;
      if (status === 'outcome_unknown') {
        const ageMs = now() - Date.parse(op.updatedAt);
        st.oldestOutcomeUnknownAgeMs = Math.max(st.oldestOutcomeUnknownAgeMs ?? 0, ageMs);
      }
      byScope.set(op.scope, st);
    }
  }
  return [...byScope.values()].sort((a, b) => a.scope.localeCompare(b.scope));
}

function scopeTable(stats: ScopeStats[], partial: boolean): HTMLElement {
  if (stats.length === 0) return h('p', {}, 'Nothing open in your scopes.');
  const head = h(
    'tr',
    {},
    h('th', { scope: 'col' }, 'Scope'),
    ...OPEN.map((st) => h('th', { scope: 'col' }, st)),
    h('th', { scope: 'col' }, 'Oldest outcome_unknown'),
  );
  const rows = stats.map((st) =>
    h(
      'tr',
      {},
      h(
        'th',
        { scope: 'row' },
        h('a', { href: `#/attention?scope=${encodeURIComponent(st.scope)}` }, st.scope),
      ),
      ...OPEN.map((status) => h('td', { class: 'num' }, `${st.counts[status] ?? 0}${partial ? '+' : ''}`)),
      h('td', {}, st.oldestOutcomeUnknownAgeMs === null ? '—' : duration(st.oldestOutcomeUnknownAgeMs)),
    ),
  );
  return h(
    'div',
    { class: 'table-wrap' },
    h(
      'table',
      {},
      h('caption', { class: 'visually-hidden' }, 'Open operations per scope'),
      h('thead', {}, head),
      h('tbody', {}, ...rows),
    ),
  );
}

export function overviewView(ctx: Ctx): View {
  const body = h('div', { 'aria-busy': 'true' }, h('p', {}, 'Loading…'));
  const updated = h('p', { class: 'hint' });
  const el = h(
    'section',
    { 'aria-labelledby': 'view-title' },
    h('h1', { id: 'view-title', tabindex: '-1' }, 'Overview'),
    updated,
    body,
  );

  async function load(): Promise<void> {
    try {
      const wanted = ctx.role === 'operator' ? (['outcome_unknown', 'pending_approval'] as const) : OPEN;
      const lists = await Promise.all(wanted.map((st) => listAll(ctx.api, st)));
      const byStatus = Object.fromEntries(wanted.map((st, i) => [st, lists[i]!.items]));
      const partial = lists.some((l) => !l.complete);
      const stats = ctx.role === 'operator' ? (await ctx.api.stats()).scopes : statsFromLists(byStatus);
      const unknown = byStatus.outcome_unknown ?? [];
      const pending = byStatus.pending_approval ?? [];
      const t = now();
      const series = [
        { label: 'outcome_unknown', cls: 'unknown', values: seriesFor(unknown, (op) => op.updatedAt, t) },
        { label: 'pending_approval', cls: 'pending', values: seriesFor(pending, (op) => op.createdAt, t) },
      ];
      replace(
        body,
        h('h2', {}, 'Per scope'),
        scopeTable(stats, partial && ctx.role === 'client'),
        h('h2', {}, `Unknown and pending, last ${CHART_HOURS} hours`),
        h(
          'figure',
          { class: 'chart-box' },
          chart(series),
          h(
            'figcaption',
            {},
            h('span', { class: 'swatch unknown' }, ''),
            ' outcome_unknown ',
            h('span', { class: 'swatch pending' }, ''),
            ' pending_approval. Operations open now, counted from when they entered that state.',
          ),
        ),
      );
      body.setAttribute('aria-busy', 'false');
      updated.textContent = `Updated ${when(new Date(t).toISOString())}`;
    } catch (err) {
      replace(body, notice('alert', `Could not load the overview: ${(err as Error).message}`));
    }
  }

  void load();
  return { el, refresh: load };
}
