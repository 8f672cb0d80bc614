/**
 * The only way the console builds markup: elements and text nodes. Data is
 * never parsed as HTML (no innerHTML), so keys, previews and results that
 * carry `<script>` or `<img onerror>` stay text.
 */

type Child = Node | string | number | null | undefined | false;
type Handler = (event: Event) => void;
export type Props = Record<string, string | number | boolean | Handler | null | undefined>;

function apply(el: Element, props: Props): void {
  for (const [name, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (typeof value === 'function') {
      if (!name.startsWith('on')) throw new Error(`handler ${name} must be named on<event>`);
      el.addEventListener(name.slice(2).toLowerCase(), value);
      continue;
    }
    // Inline styles and inline handlers would break the CSP and let data become code.
    if (name === 'style' || name.startsWith('on')) throw new Error(`attribute ${name} is not allowed`);
    el.setAttribute(name === 'className' ? 'class' : name, value === true ? '' : String(value));
  }
}

function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
  }
}

/** An HTML element with attributes, `on<event>` listeners and children (strings become text). */
export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  props: Props = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

/** An SVG element, for the chart. */
export function s(tag: string, props: Props = {}, ...children: Child[]): SVGElement {
  const el = document.createElementNS(SVG_NS, tag) as SVGElement;
  apply(el, props);
  append(el, children);
  return el;
}

/** Replaces all children of `el`. */
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/** A `<dl>` of label/value rows; a null value reads as a dash. */
export function fields(rows: [string, Child][]): HTMLDListElement {
  const dl = h('dl', { class: 'fields' });
  for (const [label, value] of rows) {
    dl.append(h('dt', {}, label), h('dd', {}, value === null || value === undefined ? '—' : value));
  }
  return dl;
}

/** A message box: `alert` for failures (announced at once), `status` for confirmations. */
export function notice(kind: 'alert' | 'status', text: string): HTMLElement {
  return h('p', { role: kind, class: `notice notice-${kind}` }, text);
}
