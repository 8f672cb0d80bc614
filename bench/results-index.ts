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

/** The targets of the hot-path work, as the main README's table states them. */
const TARGET = { s1: 0.35, s2: 0.2, s8Ms: 10, s4: 0.9, drainS: 10, s5Rate: 0.7, s5P99: 1.5, s7MiB: 256 };

interface Run {
  stamp: string;
  meta: Meta;
  results: ScenarioResult[];
}

function rows(run: Run, id: string): Row[] {
  return run.results.filter((r) => r.id === id).flatMap((r) => r.rows);
}

function find(run: Run, id: string, scenario: (s: string) => boolean, figure: (f: string) => boolean) {
  return rows(run, id).find((r) => scenario(r.scenario) && figure(r.figure));
}

const plain = (s: string) => !s.includes('coalescing off') && !s.includes('64 clients');

interface Line {
  started: string;
  commit: string;
  cpu: string;
  floor?: number;
  s1?: number;
  s2?: number;
  s8?: number;
  stack?: number;
  s4?: number;
  drain?: number;
  rate?: number;
  p99?: number;
  rss?: number;
  s3?: string;
  short: string[];
}

function line(run: Run): Line {
  const s1 = find(run, 'S1', plain, (f) => f === 'cycles/s');
  const s2 = find(run, 'S2', plain, (f) => f === 'requests/s');
  const s8 = find(
    run,
    'S8',
    () => true,
    (f) => f.startsWith('begin+complete p99,') && !f.includes('stack floor'),
  );
  const stack = find(
    run,
    'S8',
    () => true,
    (f) => f.startsWith('begin+complete p99,') && f.includes('stack floor'),
  );
  const s4 = find(
    run,
    'S4',
    () => true,
    (f) => f.includes('drift cancelled'),
  );
  const drain = find(
    run,
    'S5',
    () => true,
    (f) => f === 'seconds to drain',
  );
  const rate = find(
    run,
    'S5',
    () => true,
    (f) => f.startsWith('S1 cycles/s: during the drain'),
  );
  const p99 = find(
    run,
    'S5',
    () => true,
    (f) => f.startsWith('S1 p99: during the drain'),
  );
  const rss = find(run, 'S7', plain, (f) => f.startsWith('peak RSS'));
  const s3 = find(
    run,
    'S3',
    () => true,
    (f) => f === 'rounds with exactly one winner',
  );
  const l: Line = {
    started: run.meta.startedAt.slice(0, 16).replace('T', ' '),
    commit: run.meta.commit,
    cpu: run.meta.machine.cpuModel,
    floor: s1?.reference?.median,
    s1: s1?.ratio?.median,
    s2: s2?.httpRatio?.median,
    s8: s8?.service?.median,
    stack: stack?.reference?.median,
    s4: s4?.service?.median,
    drain: drain?.service?.median,
    rate: rate?.ratio?.median,
    p99: p99?.ratio?.median,
    rss: rss?.service?.median,
    s3: s3?.text,
    short: [],
  };
  const miss = (name: string, ok: boolean | undefined) => {
    if (ok === false) l.short.push(name);
  };
  const at = (v: number | undefined, ok: (v: number) => boolean) => (v === undefined ? undefined : ok(v));
  miss(
    'S1',
    at(l.s1, (v) => v >= TARGET.s1),
  );
  miss(
    'S2',
    at(l.s2, (v) => v >= TARGET.s2),
  );
  miss(
    'S8',
    at(l.s8, (v) => v < TARGET.s8Ms),
  );
  miss(
    'S4',
    at(l.s4, (v) => v >= TARGET.s4),
  );
  miss(
    'S5 drain',
    at(l.drain, (v) => v < TARGET.drainS),
  );
  miss(
    'S5 rate',
    at(l.rate, (v) => v >= TARGET.s5Rate),
  );
  miss(
    'S5 p99',
    at(l.p99, (v) => v <= TARGET.s5P99),
  );
  miss(
    'S7',
    at(l.rss, (v) => v <= TARGET.s7MiB),
  );
  if (l.s3 !== undefined) {
    const [won, of] = l.s3.split('/').map(Number);
    miss('S3', won === of);
  }
  return l;
}

function fmt(v: number | undefined, digits = 2): string {
  return v === undefined || !Number.isFinite(v) ? '' : v.toFixed(digits);
}

/** Two decimals, or three where two would round across the target (0.697 against 0.7). */
function against(v: number | undefined, ok: (v: number) => boolean): string {
  if (v === undefined) return '';
  return ok(v) === ok(Number(v.toFixed(2))) ? v.toFixed(2) : v.toFixed(3);
}

function int(v: number | undefined): string {
  return v === undefined ? '' : Math.round(v).toLocaleString('en-US');
}

function ms(v: number | undefined): string {
  if (v === undefined) return '';
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

/** The run of record: the kept run whose table `latest.md` is a copy of. */
function recordStamp(runs: Run[]): string | undefined {
  const latest = new URL('latest.md', DIR);
  if (!existsSync(latest)) return undefined;
  const text = readFileSync(latest, 'utf8');
  return runs.find(
    (r) =>
      existsSync(new URL(`${r.stamp}.md`, DIR)) &&
      readFileSync(new URL(`${r.stamp}.md`, DIR), 'utf8') === text,
  )?.stamp;
}

export function render(runs: Run[]): string {
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
    `| run (UTC) | commit | CPU | floor, S1 cycles/s | S1 / floor (≥ ${TARGET.s1}) | S2 / HTTP floor (≥ ${TARGET.s2}) | S8 p99 ms (< ${TARGET.s8Ms}) | S8 stack floor p99 ms | S4 (≥ ${TARGET.s4}) | S5 drain s (< ${TARGET.drainS}) | S5 S1 rate (≥ ${TARGET.s5Rate}x) | S5 S1 p99 (≤ ${TARGET.s5P99}x) | S7 MiB (≤ ${TARGET.s7MiB}) | S3 | short of |`,
    '| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |',
  ];
  for (const run of [...runs].reverse()) {
    const l = line(run);
    const name = `[${l.started}](${run.stamp}.md)${run.stamp === record ? ' (run of record)' : ''}`;
    out.push(
      `| ${name} | \`${l.commit}\` | ${l.cpu} | ${int(l.floor)} | ${against(l.s1, (v) => v >= TARGET.s1)} | ${against(l.s2, (v) => v >= TARGET.s2)} | ${ms(l.s8)} | ${ms(l.stack)} | ${against(l.s4, (v) => v >= TARGET.s4)} | ${against(l.drain, (v) => v < TARGET.drainS)} | ${against(l.rate, (v) => v >= TARGET.s5Rate)} | ${against(l.p99, (v) => v <= TARGET.s5P99)} | ${fmt(l.rss, 0)} | ${l.s3 ?? ''} | ${l.short.join(', ') || 'none'} |`,
    );
  }
  const lines = runs.map(line);
  const count = (name: string, has: (l: Line) => boolean) => {
    const with_ = lines.filter(has);
    const met = with_.filter((l) => !l.short.includes(name)).length;
    return `${name} ${met} of ${with_.length}`;
  };
  out.push(
    '',
    `Targets met, each counted over the kept runs that measured it: ${[
      count('S1', (l) => l.s1 !== undefined),
      count('S2', (l) => l.s2 !== undefined),
      count('S8', (l) => l.s8 !== undefined),
      count('S4', (l) => l.s4 !== undefined),
      count('S5 drain', (l) => l.drain !== undefined),
      count('S5 rate', (l) => l.rate !== undefined),
      count('S5 p99', (l) => l.p99 !== undefined),
      count('S7', (l) => l.rss !== undefined),
      count('S3', (l) => l.s3 !== undefined),
    ].join('; ')}. The stack floor's p99 was under ${TARGET.s8Ms} ms in ${
      lines.filter((l) => l.stack !== undefined && l.stack < TARGET.s8Ms).length
    } of the ${lines.filter((l) => l.stack !== undefined).length} runs that measured it.`,
    '',
  );
  return out.join('\n');
}

export function readRuns(): Run[] {
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
