/**
 * Results: a JSON file with every run, a Markdown table of medians, and an
 * SVG chart of the throughput figures against their pgbench reference.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Row, ScenarioResult } from './bench.js';
import type { Spread } from './stats.js';

export interface Meta {
  startedAt: string;
  finishedAt: string;
  durationSeconds: number;
  commit: string;
  machine: { cpus: number; cpuModel: string; memGiB: number; loadAvgStart: number[]; loadAvgEnd: number[] };
  node: string;
  postgres: string;
  postgresSettings: Record<string, string>;
  pgbench: string;
  pgbenchMode: string;
  service: string;
  runs: number;
  seconds: number;
  warmupSeconds: number;
  parity: { ok: boolean; differences: string[]; scriptNotes: string[] } | undefined;
}

function num(v: number): string {
  if (!Number.isFinite(v)) return 'n/a';
  const a = Math.abs(v);
  if (a >= 100) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

function cell(s: Spread | undefined, unit = ''): string {
  if (!s) return '';
  const u = unit && unit !== 'x' && unit !== '/s' ? ` ${unit}` : '';
  if (s.min === s.max || !Number.isFinite(s.min)) return `${num(s.median)}${u}`;
  return `${num(s.median)}${u} [${num(s.min)}–${num(s.max)}]`;
}

export function markdown(meta: Meta, results: ScenarioResult[]): string {
  const rows = results.flatMap((r) => r.rows);
  const out: string[] = [];
  out.push(`# Idem benchmark, ${meta.startedAt.slice(0, 16).replace('T', ' ')} UTC`);
  out.push('');
  out.push(
    `Commit \`${meta.commit}\`; ${meta.machine.cpus} CPUs (${meta.machine.cpuModel}), ${meta.machine.memGiB} GiB; ` +
      `load average ${meta.machine.loadAvgStart.map((l) => l.toFixed(1)).join('/')} at start, ` +
      `${meta.machine.loadAvgEnd.map((l) => l.toFixed(1)).join('/')} at end. ` +
      `Node ${meta.node}; ${meta.postgres.split(' on ')[0]} (synchronous_commit ${meta.postgresSettings.synchronous_commit}, ` +
      `fsync ${meta.postgresSettings.fsync}, shared_buffers ${meta.postgresSettings.shared_buffers}); ` +
      `${meta.pgbench}, \`-M ${meta.pgbenchMode}\`. Service: ${meta.service}.`,
  );
  out.push('');
  out.push(
    `Each figure: median of ${meta.runs} runs [min–max], ${meta.seconds} s measured after ${meta.warmupSeconds} s of warm-up. ` +
      'Ratio = service / reference per run, median of the ratios: for rates 1.0 is parity and lower is slower; ' +
      "for latencies higher is slower. The reference is pgbench running the service's own statements unless the figure says otherwise.",
  );
  out.push('');
  const loads = results
    .filter((r) => r.loadAvg)
    .map((r) => `${r.id} ${r.loadAvg![0].toFixed(1)}→${r.loadAvg![1].toFixed(1)}`);
  if (loads.length > 0) {
    out.push(
      `1-minute load average per scenario (start→end, ${meta.machine.cpus} CPUs): ${[...new Set(loads)].join(', ')}.`,
    );
    out.push('');
  }
  out.push('| id | scenario | figure | service | reference | ratio |');
  out.push('| --- | --- | --- | --- | --- | --- |');
  let last = '';
  for (const r of rows) {
    const scen = r.scenario === last ? '' : r.scenario;
    last = r.scenario;
    const svc = r.text ?? cell(r.service, r.unit);
    out.push(
      `| ${r.id} | ${scen} | ${r.figure}${unitNote(r)} | ${svc} | ${cell(r.reference, r.unit)} | ${cell(r.ratio)} |`,
    );
  }
  const notes = [
    ...(meta.parity && !meta.parity.ok
      ? [
          `PARITY: the pgbench script does not write what the service writes: ${meta.parity.differences.join('; ')}`,
        ]
      : meta.parity
        ? [
            'Parity: one service cycle and one pgbench cycle wrote identical rows and events (ids, keys and times aside).',
          ]
        : []),
    ...(meta.parity?.scriptNotes.length
      ? [
          `pgbench script text adapted, same SQL to Postgres (pgbench reads \`:name\` inside literals as a variable): ${meta.parity.scriptNotes.join('; ')}`,
        ]
      : []),
    ...results.flatMap((r) => r.notes),
  ];
  if (notes.length > 0) {
    out.push('');
    for (const n of notes) out.push(`- ${n}`);
  }
  out.push('');
  out.push(
    `Finished in ${Math.round(meta.durationSeconds)} s. Raw runs: the JSON file of the same name. How to read: bench/README.md.`,
  );
  return `${out.join('\n')}\n`;
}

function unitNote(r: Row): string {
  if (r.unit === '/s' || r.unit === 'x' || r.unit === '' || r.figure.includes(r.unit)) return '';
  return ` (${r.unit})`;
}

/** Horizontal bars: service vs pgbench median per throughput figure, whiskers min–max. */
export function svgChart(results: ScenarioResult[]): string | undefined {
  const bars = results
    .flatMap((r) => r.rows)
    .filter((r) => r.unit === '/s' && r.service && r.reference && r.ratio && r.id !== 'S5');
  if (bars.length === 0) return undefined;
  const max = Math.max(...bars.flatMap((r) => [r.service!.max, r.reference!.max]));
  const left = 330;
  const width = 860;
  const plot = width - left - 90;
  const rowH = 46;
  const top = 40;
  const height = top + bars.length * rowH + 30;
  const x = (v: number) => left + (v / max) * plot;
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif" font-size="12">`,
    `<text x="10" y="20" font-size="14" font-weight="bold">Throughput: service (blue) vs pgbench on the same SQL (grey), median with min–max</text>`,
  );
  bars.forEach((r, i) => {
    const y = top + i * rowH;
    parts.push(`<text x="10" y="${y + 22}">${esc(`${r.id} ${r.scenario}`.slice(0, 52))}</text>`);
    for (const [j, s, color] of [
      [0, r.service!, '#3b6fb6'],
      [1, r.reference!, '#9a9a9a'],
    ] as const) {
      const by = y + 4 + j * 18;
      parts.push(
        `<rect x="${left}" y="${by}" width="${(x(s.median) - left).toFixed(1)}" height="14" fill="${color}"/>`,
        `<line x1="${x(s.min).toFixed(1)}" x2="${x(s.max).toFixed(1)}" y1="${by + 7}" y2="${by + 7}" stroke="#000"/>`,
        `<text x="${(x(s.max) + 6).toFixed(1)}" y="${by + 12}">${num(s.median)}</text>`,
      );
    }
    parts.push(`<text x="${width - 60}" y="${y + 22}">×${num(r.ratio!.median)}</text>`);
  });
  parts.push('</svg>');
  return `${parts.join('\n')}\n`;
}

export async function writeResults(
  dir: string,
  stamp: string,
  meta: Meta,
  results: ScenarioResult[],
): Promise<{ md: string; files: string[] }> {
  await mkdir(dir, { recursive: true });
  const md = markdown(meta, results);
  const files: string[] = [];
  const put = async (name: string, text: string) => {
    await writeFile(join(dir, name), text);
    files.push(join(dir, name));
  };
  await put(`${stamp}.json`, `${JSON.stringify({ meta, results }, null, 2)}\n`);
  const svg = svgChart(results);
  const withChart = svg ? `${md}\n![throughput](${stamp}.svg)\n` : md;
  if (svg) await put(`${stamp}.svg`, svg);
  await put(`${stamp}.md`, withChart);
  await put('latest.md', withChart);
  return { md, files };
}
