/**
 * Writes bench/results/README.md: one row per kept run (every `<timestamp>.json`
 * in bench/results/), its headline figures beside the targets, and which targets
 * it missed, so that counts across runs are read off one table instead of
 * gathered from prose. `--check` fails when the committed file is stale; CI runs
 * it. `npm run bench` rewrites it when it writes into bench/results/.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Row, ScenarioResult } from './lib/bench.js';
import type { Meta } from './lib/report.js';

const DIR = new URL('results/', import.meta.url);
const FILE = new URL('README.md', DIR);

interface Run {
  stamp: string;
  meta: Meta;
  results: ScenarioResult[];
}

/** A figure of a run: the first row of scenario `id` that `where` accepts, read by `pick`. */
interface Figure {
  id: string;
  where: (r: Row) => boolean;
  pick: (r: Row) => number | undefined;
}

function figure(run: Run, f: Figure): number | undefined {
  const row = run.results.flatMap((r) => (r.id === f.id ? r.rows : [])).find(f.where);
  return row ? f.pick(row) : undefined;
}

/** S1, S2 and S7 at 16 clients with coalescing on (the default), as the targets are stated. */
const plain = (r: Row) => !r.scenario.includes('coalescing off') && !r.scenario.includes('64 clients');
const s1Cycles = (r: Row) => plain(r) && r.figure === 'cycles/s';
const p99Row = (stack: boolean) => (r: Row) =>
  r.figure.startsWith('begin+complete p99,') && r.figure.includes('stack floor') === stack;
const FLOOR: Figure = { id: 'S1', where: s1Cycles, pick: (r) => r.reference?.median };

/**
 * The targets of the hot-path work, as the main README's table states them, each
 * with the figure it is judged on. Two decimals are shown unless they would round
 * across the target (0.697 against 0.7), then three.
 */
const COLUMNS: (Figure & {
  name: string;
  header: string;
  ok: (v: number) => boolean;
  show?: (v: number) => string;
  /** A reference, not a target of the service: shown and counted, never "short of". */
  reference?: true;
})[] = [
  {
    name: 'S1',
    header: 'S1 / floor (≥ 0.35)',
    id: 'S1',
    where: s1Cycles,
    pick: (r) => r.ratio?.median,
    ok: (v) => v >= 0.35,
  },
  {
    name: 'S2',
    header: 'S2 / HTTP floor (≥ 0.2)',
    id: 'S2',
    where: (r) => plain(r) && r.figure === 'requests/s',
    pick: (r) => r.httpRatio?.median,
    ok: (v) => v >= 0.2,
  },
  {
    name: 'S8',
    header: 'S8 p99 ms (< 10)',
    id: 'S8',
    where: p99Row(false),
    pick: (r) => r.service?.median,
    ok: (v) => v < 10,
    show: ms,
  },
  {
    name: 'stack floor',
    header: 'S8 stack floor p99 ms',
    id: 'S8',
    where: p99Row(true),
    pick: (r) => r.reference?.median,
    ok: (v) => v < 10,
    show: ms,
    reference: true,
  },
  {
    name: 'S4',
    header: 'S4 (≥ 0.9)',
    id: 'S4',
    where: (r) => r.figure.includes('drift cancelled'),
    pick: (r) => r.service?.median,
    ok: (v) => v >= 0.9,
  },
  {
    name: 'S5 drain',
    header: 'S5 drain s (< 10)',
    id: 'S5',
    where: (r) => r.figure === 'seconds to drain',
    pick: (r) => r.service?.median,
    ok: (v) => v < 10,
  },
  {
    name: 'S5 rate',
    header: 'S5 S1 rate (≥ 0.7x)',
    id: 'S5',
    where: (r) => r.figure.startsWith('S1 cycles/s: during the drain'),
    pick: (r) => r.ratio?.median,
    ok: (v) => v >= 0.7,
  },
  {
    name: 'S5 p99',
    header: 'S5 S1 p99 (≤ 1.5x)',
    id: 'S5',
    where: (r) => r.figure.startsWith('S1 p99: during the drain'),
    pick: (r) => r.ratio?.median,
    ok: (v) => v <= 1.5,
  },
  {
    name: 'S7',
    header: 'S7 MiB (≤ 256)',
    id: 'S7',
    where: (r) => plain(r) && r.figure.startsWith('peak RSS'),
    pick: (r) => r.service?.median,
    ok: (v) => v <= 256,
    show: (v) => v.toFixed(0),
  },
  {
    name: 'S3',
    header: 'S3 rounds with one winner',
    id: 'S3',
    where: (r) => r.figure === 'rounds with exactly one winner',
    pick: (r) => {
      const [won, of] = (r.text ?? '').split('/').map(Number);
      return won !== undefined && of ? won / of : undefined;
    },
    ok: (v) => v === 1,
    show: (v) => (v === 1 ? 'all' : `${(v * 100).toFixed(0)}%`),
  },
];

function ms(v: number): string {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

function decimals(v: number, ok: (v: number) => boolean): string {
  return ok(v) === ok(Number(v.toFixed(2))) ? v.toFixed(2) : v.toFixed(3);
}

/** The run of record: the kept run whose table `latest.md` is a copy of. */
function recordStamp(runs: Run[]): string | undefined {
  const read = (name: string) => {
    const url = new URL(name, DIR);
    return existsSync(url) ? readFileSync(url, 'utf8') : undefined;
  };
  const latest = read('latest.md');
  return latest === undefined ? undefined : runs.find((r) => read(`${r.stamp}.md`) === latest)?.stamp;
}

function render(runs: Run[]): string {
  const record = recordStamp(runs);
  const out: string[] = [
    '# Kept benchmark runs',
    '',
    'Generated by `npm run bench:index` from the JSON files beside it (CI checks that it is',
    'current); `npm run bench` rewrites it when it writes here. One row per kept run, newest',
    'first: the headline figure of each target (medians of 3 runs; how to read them:',
    '[`../README.md`](../README.md)), and the targets the run missed. The run of record, whose',
    'table `latest.md` copies and the main README quotes, is marked. What each run showed and',
    'why is in [`docs/performance.md`](../../docs/performance.md).',
    '',
    'Read the columns with their history. S8 has a stack floor (a bare route running the',
    "floor's SQL) since 2026-12-04 20:07. S4's halves run paired, in alternating rounds, since",
    '2026-12-05 20:10; before that a drift of the host between them moved the figure. S5 starts',
    'from a full set of WAL files kept for reuse since 2026-12-07 00:41. Absolute figures move',
    "with the host (the floor's S1 cycles/s shows how fast it was); ratios are to references",
    'measured in the same run.',
    '',
    `| run (UTC) | commit | CPU | floor, S1 cycles/s | ${COLUMNS.map((c) => c.header).join(' | ')} | short of |`,
    `|${' --- |'.repeat(COLUMNS.length + 5)}`,
  ];
  const met = new Map(COLUMNS.map((c) => [c.name, { met: 0, of: 0 }]));
  for (const run of [...runs].reverse()) {
    const floor = figure(run, FLOOR);
    const short: string[] = [];
    const cells = COLUMNS.map((c) => {
      const v = figure(run, c);
      if (v === undefined) return '';
      const count = met.get(c.name)!;
      count.of++;
      if (c.ok(v)) count.met++;
      else if (!c.reference) short.push(c.name);
      return c.show ? c.show(v) : decimals(v, c.ok);
    });
    const name = `[${run.meta.startedAt.slice(0, 16).replace('T', ' ')}](${run.stamp}.md)`;
    out.push(
      `| ${name}${run.stamp === record ? ' (run of record)' : ''} | \`${run.meta.commit}\` | ${run.meta.machine.cpuModel} | ${floor === undefined ? '' : Math.round(floor).toLocaleString('en-US')} | ${cells.join(' | ')} | ${short.join(', ') || 'none'} |`,
    );
  }
  const counts = COLUMNS.filter((c) => !c.reference)
    .map((c) => `${c.name} ${met.get(c.name)!.met} of ${met.get(c.name)!.of}`)
    .join('; ');
  const stack = met.get('stack floor')!;
  out.push(
    '',
    `Targets met, each counted over the kept runs that measured it: ${counts}. The stack floor's p99 was under 10 ms in ${stack.met} of the ${stack.of} runs that measured it.`,
    '',
  );
  return out.join('\n');
}

function readRuns(): Run[] {
  return readdirSync(DIR)
    .filter((f) => /^\d{8}T\d{6}\.json$/.test(f))
    .sort()
    .map((f) => {
      const { meta, results } = JSON.parse(readFileSync(new URL(f, DIR), 'utf8')) as Omit<Run, 'stamp'>;
      return { stamp: f.slice(0, -'.json'.length), meta, results };
    });
}

/** Rewrites bench/results/README.md; for `npm run bench` after it wrote there. */
export function writeIndex(): string {
  writeFileSync(FILE, render(readRuns()));
  return fileURLToPath(FILE);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = render(readRuns());
  if (process.argv.includes('--check')) {
    if (!existsSync(FILE) || readFileSync(FILE, 'utf8') !== text) {
      console.error('bench/results/README.md is stale: run `npm run bench:index` and commit the result');
      process.exit(1);
    }
    console.log('bench/results/README.md is current');
  } else {
    writeFileSync(FILE, text);
    console.log('wrote bench/results/README.md');
  }
}
