/**
 * The console's shell: sign-in, the header and navigation, hash routing
 * between views, and auto-refresh of the views that allow it.
 */
import { Api } from './api.js';
import { h, replace } from './dom.js';
import { autoRefresh, clearSession, loadSession, type Session, setAutoRefresh } from './session.js';
import { attentionView, type Filters } from './views/attention.js';
import type { Ctx, View } from './views/context.js';
import { operationView } from './views/operation.js';
import { overviewView } from './views/overview.js';
import { searchView } from './views/search.js';
import { signInView } from './views/sign-in.js';

const REFRESH_MS = 15_000;
const root = document.getElementById('app')!;
let current: View | null = null;
let timer: ReturnType<typeof setInterval> | undefined;

function route(ctx: Ctx, hash: string): View {
  const [path = '', query = ''] = hash.replace(/^#/, '').split('?');
  const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
  if (parts[0] === 'attention') {
    return attentionView(ctx, Object.fromEntries(new URLSearchParams(query)) as Filters);
  }
  if (parts[0] === 'op' && parts.length === 3)
    return operationView(ctx, { scope: parts[1]!, key: parts[2]! });
  if (parts[0] === 'id' && parts[1]) return operationView(ctx, { id: parts[1] });
  if (parts[0] === 'search') return searchView(ctx);
  return overviewView(ctx);
}

function nav(): HTMLElement {
  const link = (href: string, label: string) => h('li', {}, h('a', { href }, label));
  return h(
    'nav',
    { 'aria-label': 'Views' },
    h('ul', {}, link('#/', 'Overview'), link('#/attention', 'Needs attention'), link('#/search', 'Search')),
  );
}

function shell(session: Session): void {
  const main = h('main', { id: 'main' });
  const ctx: Ctx = {
    api: new Api(session.apiKey),
    role: session.role,
    go: (hash) => {
      if (location.hash === hash) show();
      else location.hash = hash;
    },
  };
  const refresh = h('input', { id: 'auto-refresh', type: 'checkbox', checked: autoRefresh() });
  refresh.addEventListener('change', () => setAutoRefresh(refresh.checked));
  const signOut = h('button', { type: 'button', onclick: () => signOutNow() }, 'Sign out');
  const header = h(
    'header',
    { class: 'top' },
    h('p', { class: 'brand' }, 'Idem console'),
    nav(),
    h(
      'div',
      { class: 'session' },
      h(
        'span',
        { class: `role role-${session.role}` },
        session.role === 'operator' ? 'Operator key' : 'Client key (read-only)',
      ),
      h('span', { class: 'toggle' }, refresh, h('label', { for: 'auto-refresh' }, 'Auto-refresh')),
      signOut,
    ),
  );
  replace(root, header, main);

  function show(): void {
    current?.dispose?.();
    current = route(ctx, location.hash);
    replace(main, current.el);
    for (const a of header.querySelectorAll('nav a')) {
      const here = (a.getAttribute('href') ?? '') === (location.hash.split('?')[0] || '#/');
      if (here) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
    current.el.querySelector<HTMLElement>('h1')?.focus();
  }

  window.onhashchange = show;
  clearInterval(timer);
  timer = setInterval(() => {
    if (autoRefresh() && document.visibilityState === 'visible') void current?.refresh?.();
  }, REFRESH_MS);
  show();
}

function signOutNow(): void {
  clearSession();
  clearInterval(timer);
  current?.dispose?.();
  current = null;
  window.onhashchange = null;
  start();
}

function start(): void {
  const session = loadSession();
  if (session) shell(session);
  else {
    replace(
      root,
      signInView((s) => shell(s)),
    );
    root.querySelector<HTMLElement>('input')?.focus();
  }
}

start();
