/** Search: by key (exact, within a scope) or by id. Both open the operation's page. */
import { h } from '../dom.js';
import { type Ctx, opHash, type View } from './context.js';

const field = (id: string, label: string, required = true) =>
  h(
    'div',
    { class: 'field' },
    h('label', { for: id }, label),
    h('input', { id, name: id, required, autocomplete: 'off' }),
  );

export function searchView(ctx: Ctx): View {
  const byKey = h(
    'form',
    { class: 'control', 'aria-label': 'Find by key' },
    field('s-scope', 'Scope'),
    field('s-key', 'Key (exact)'),
    h('button', { type: 'submit' }, 'Find by key'),
  );
  byKey.addEventListener('submit', (e) => {
    e.preventDefault();
    const data = new FormData(byKey);
    ctx.go(opHash(String(data.get('s-scope')).trim(), String(data.get('s-key'))));
  });
  const byId = h(
    'form',
    { class: 'control', 'aria-label': 'Find by ID' },
    field('s-id', 'Operation ID'),
    h('button', { type: 'submit' }, 'Find by ID'),
  );
  byId.addEventListener('submit', (e) => {
    e.preventDefault();
    ctx.go(`#/id/${encodeURIComponent(String(new FormData(byId).get('s-id')).trim())}`);
  });
  const el = h(
    'section',
    { 'aria-labelledby': 'view-title' },
    h('h1', { id: 'view-title', tabindex: '-1' }, 'Search'),
    h('h2', {}, 'By key'),
    byKey,
    h('h2', {}, 'By ID'),
    byId,
  );
  return { el };
}
