/**
 * The overview's chart: how many operations were outcome_unknown and
 * pending_approval over the last hours, drawn as SVG elements (no markup).
 *
 * Derived from list data: an outcome_unknown operation counts from the time it
 * became unknown (its updatedAt), a pending one from its creation. Only
 * operations still open are listed, so one settled within the window no
 * longer counts: the chart shows how the backlog that is open now built up.
 */
import type { Operation } from './api.js';
import { s } from './dom.js';

export const CHART_HOURS = 6;
const POINTS = 25;
const W = 480;
const H = 140;
const PAD = { left: 34, right: 8, top: 10, bottom: 22 };

export interface Series {
  label: string;
  cls: string;
  values: number[];
}

/** Counts at POINTS evenly spaced instants ending at `nowMs`. */
export function seriesFor(ops: Operation[], since: (op: Operation) => string, nowMs: number): number[] {
  const starts = ops.map((op) => Date.parse(since(op)));
  const step = (CHART_HOURS * 3_600_000) / (POINTS - 1);
  return Array.from({ length: POINTS }, (_, i) => {
    const t = nowMs - (POINTS - 1 - i) * step;
    return starts.filter((x) => x <= t).length;
  });
}

export function chart(series: Series[]): SVGElement {
  const max = Math.max(1, ...series.flatMap((x) => x.values));
  const x = (i: number) => PAD.left + (i * (W - PAD.left - PAD.right)) / (POINTS - 1);
  const y = (v: number) => PAD.top + (1 - v / max) * (H - PAD.top - PAD.bottom);
  const summary = series
    .map((x) => `${x.label}: ${x.values[0]} ${CHART_HOURS} h ago, ${x.values[x.values.length - 1]} now`)
    .join('; ');
  const svg = s(
    'svg',
    {
      viewBox: `0 0 ${W} ${H}`,
      role: 'img',
      'aria-label': `Open operations over the last ${CHART_HOURS} hours. ${summary}`,
      class: 'chart',
    },
    s('title', {}, `Open operations over the last ${CHART_HOURS} hours`),
    s('line', { x1: PAD.left, y1: y(0), x2: W - PAD.right, y2: y(0), class: 'axis' }),
    s('line', { x1: PAD.left, y1: y(max), x2: PAD.left, y2: y(0), class: 'axis' }),
    s('text', { x: PAD.left - 4, y: y(max) + 4, class: 'tick end' }, max),
    s('text', { x: PAD.left - 4, y: y(0) + 4, class: 'tick end' }, 0),
    s('text', { x: PAD.left, y: H - 6, class: 'tick' }, `${CHART_HOURS} h ago`),
    s('text', { x: W - PAD.right, y: H - 6, class: 'tick end' }, 'now'),
  );
  for (const line of series) {
    const points = line.values.map((v, i) => `${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(' ');
    svg.append(s('polyline', { points, class: `series ${line.cls}` }));
  }
  return svg;
}
