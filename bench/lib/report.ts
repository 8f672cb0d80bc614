/**
 * Results: a JSON file with every run, a Markdown table of medians, and an
 * SVG chart of the throughput figures against their floors.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Row, ScenarioResult } from './bench.js';
import { vacuumsForServer } from './database.js';
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
  parity: { ok: boolean; differences: string[]; scriptNotes: string[]; sizes: string } | undefined;
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
      `fsync ${meta.postgresSettings.fsync}, shared_buffers ${meta.postgresSettings.shared_buffers}, ` +
      `autovacuum ${meta.postgresSettings.autovacuum ?? 'unknown'}${vacuumsForServer(meta.postgresSettings) ? ': the bench runs VACUUM (ANALYZE) on its database before each scenario instead' : ''}); ` +
      `${meta.pgbench}: the floor \`-M prepared\`, the same-SQL diagnostic \`-M ${meta.pgbenchMode}\`. Service: ${meta.service}.`,
  );
  out.push('');
  out.push(
    `Each figure: median of ${meta.runs} runs [min–max], ${meta.seconds} s measured after ${meta.warmupSeconds} s of warm-up. ` +
      '**floor** = the least durable SQL doing the same work, hand-written, `pgbench -M prepared`, same connections ' +
      '(or the reference the figure names: S4 empty, S5 before, S6 bare); **HTTP floor** = a bare fastify route ' +
      "answering a JSON body of the service's answer size, same driver; **same SQL** = pgbench on the service's own " +
      'statements (a diagnostic). Ratios are service / reference per run, median of the ratios: for rates 1.0 is ' +
      'parity and lower is slower; for latencies higher is slower. The headline is service / floor (for S2, service / HTTP floor).',
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
  out.push(
    '| id | scenario | figure | service | floor | service / floor | HTTP floor | service / HTTP floor | same SQL |',
  );
  out.push('| --- | --- | --- | --- | --- | --- | --- | --- | --- |');
  let last = '';
  for (const r of rows) {
    const scen = r.scenario === last ? '' : r.scenario;
    last = r.scenario;
    const svc = r.text ?? cell(r.service, r.unit);
    out.push(
      `| ${r.id} | ${scen} | ${r.figure}${unitNote(r)} | ${svc} | ${cell(r.reference, r.unit)} | ${bold(cell(r.ratio))} | ` +
        `${cell(r.http, r.unit)} | ${cell(r.httpRatio)} | ${cell(r.sameSql, r.unit)} |`,
    );
  }
  const notes = [
    ...(meta.parity && !meta.parity.ok
      ? [
          `PARITY: the same-SQL pgbench script does not write what the service writes: ${meta.parity.differences.join('; ')}`,
        ]
      : meta.parity
        ? [
            'Parity: one service cycle and one same-SQL pgbench cycle wrote identical rows and events (ids, keys and times aside).',
          ]
        : []),
    ...(meta.parity ? [`Stored sizes of one cycle: ${meta.parity.sizes}.`] : []),
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

/** The headline ratio in bold, its spread not. */
function bold(s: string): string {
  if (!s) return '';
  const i = s.indexOf(' [');
  return i < 0 ? `**${s}**` : `**${s.slice(0, i)}**${s.slice(i)}`;
}

function unitNote(r: Row): string {
  if (r.unit === '/s' || r.unit === 'x' || r.unit === '' || r.figure.includes(r.unit)) return '';
  return ` (${r.unit})`;
}

/**
 * Horizontal bars per throughput figure: service, floor and HTTP floor
 * (median, whiskers min–max), each figure scaled to its own largest bar so
 * that a 50x gap and a 2x gap both stay readable.
 */
export function svgChart(results: ScenarioResult[]): string | undefined {
  const figures = results
    .flatMap((r) => r.rows)
    .filter((r) => r.unit === '/s' && r.service && r.reference && r.ratio && !['S5', 'S8'].includes(r.id));
  if (figures.length === 0) return undefined;
  const left = 330;
  const width = 1040;
  const plot = width - left - 220;
  const bar = 16;
  const top = 40;
  const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;');
  const parts: string[] = [];
  let y = top;
  for (const r of figures) {
    const sides = (
      [
        ['service', r.service, '#3b6fb6', undefined],
        ['floor', r.reference, '#9a9a9a', r.ratio],
        ['HTTP floor', r.http, '#e0a040', r.httpRatio],
      ] as const
    ).filter(([, v]) => v && Number.isFinite(v.median));
    const max = Math.max(...sides.map(([, v]) => v!.max));
    const x = (v: number) => left + (v / max) * plot;
    parts.push(`<text x="10" y="${y + 14}">${esc(`${r.id} ${r.scenario}`.slice(0, 50))}</text>`);
    sides.forEach(([name, v, color, ratio], j) => {
      const by = y + j * (bar + 4);
      const label = `${num(v!.median)} ${name}${ratio ? ` (service ×${num(ratio.median)})` : ''}`;
      parts.push(
        `<rect x="${left}" y="${by}" width="${(x(v!.median) - left).toFixed(1)}" height="${bar}" fill="${color}"/>`,
        `<line x1="${x(v!.min).toFixed(1)}" x2="${x(v!.max).toFixed(1)}" y1="${by + bar / 2}" y2="${by + bar / 2}" stroke="#000"/>`,
        `<text x="${(x(v!.max) + 6).toFixed(1)}" y="${by + 12}">${esc(label)}</text>`,
      );
    });
    y += sides.length * (bar + 4) + 14;
  }
  return `${[
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${y + 10}" font-family="sans-serif" font-size="12">`,
    `<text x="10" y="20" font-size="14" font-weight="bold">Throughput: service (blue), floor (grey), HTTP floor (orange); median, min–max; each figure on its own scale</text>`,
    ...parts,
    '</svg>',
  ].join('\n')}\n`;
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
