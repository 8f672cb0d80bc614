/**
 * What every scenario gets: settings, the database, the built service, a
 * scratch directory, and the interleaved measurement of the service next to
 * its references (floor, HTTP floor, same-SQL diagnostic) that every ratio
 * comes from.
 */
import { join } from 'node:path';
import type { BenchConfig } from './config.js';
import { type CpuWindow, cpuWindow } from './cpu.js';
import type { BenchDatabase } from './database.js';
import { HttpFloor } from './http-floor.js';
import type { MeasuredLoad } from './http-load.js';
import { Service, type ServiceBuild } from './service.js';
import { type Spread, spread } from './stats.js';

/** One line of the results table. Ratios are always service / reference. */
export interface Row {
  id: string;
  scenario: string;
  figure: string;
  unit: string;
  service?: Spread;
  /** The floor, or the reference the figure names (S4 empty, S5 before, S6 bare). */
  reference?: Spread;
  /** service / reference, per run: the headline. */
  ratio?: Spread;
  /** The HTTP floor, and service / HTTP floor. */
  http?: Spread;
  httpRatio?: Spread;
  /** The same-SQL diagnostic: pgbench on the service's own statements. */
  sameSql?: Spread;
  /** Text instead of numbers (e.g. "50/50 rounds"). */
  text?: string;
}

export interface ScenarioResult {
  id: string;
  rows: Row[];
  /** Raw per-run data, for the JSON. */
  detail: unknown;
  notes: string[];
  /** 1-minute load average when the scenario started and ended: the noise it ran in. */
  loadAvg?: [number, number];
}

export class Bench {
  #runs = 0;
  /** Every process started (services, HTTP floors), for cleanup on an abort. */
  readonly live = new Set<{ stop(): Promise<unknown> }>();
  /** S1's service cycles/s by client count (medians), for S8's arrival rate. */
  readonly s1Rate = new Map<number, number>();
  /**
   * The server runs without autovacuum and the bench stands in for it
   * (`vacuumsForServer`): a `VACUUM (ANALYZE)` before each scenario, and an
   * `ANALYZE` after each priming (`prime` in scenarios/s1-cycle.ts).
   */
  standInVacuum = false;

  constructor(
    readonly cfg: BenchConfig,
    readonly db: BenchDatabase,
    readonly build: ServiceBuild,
    readonly workDir: string,
    readonly scope = 'bench',
  ) {}

  log(msg: string): void {
    process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}\n`);
  }

  /** A number unique to each measured run: goes into keys and ids so no two runs collide. */
  nextRun(): number {
    return ++this.#runs;
  }

  /** CPU metering of a service-side window (this process drives the load). */
  serviceCpu(servicePid: number): CpuWindow {
    return cpuWindow(this.db, () => undefined, servicePid);
  }

  /** CPU metering of a pgbench window. */
  readonly pgbenchCpu = (pgbenchPid: () => number | undefined): CpuWindow => cpuWindow(this.db, pgbenchPid);

  /** The service on the bench database, or on the embedded engine when `databaseUrl` is null. */
  async startService(
    poolMax: number,
    env?: Record<string, string>,
    databaseUrl: string | null = this.db.url,
  ): Promise<Service> {
    const svc = await Service.start({
      build: this.build,
      databaseUrl: databaseUrl ?? undefined,
      poolMax,
      logFile: join(this.workDir, 'service.log'),
      env,
    });
    this.live.add(svc);
    return svc;
  }

  async stopService(svc: Service) {
    const m = await svc.stop();
    this.live.delete(svc);
    return m;
  }

  /** The HTTP floor answering with the given JSON texts. */
  async startHttpFloor(bodies: { begin: string; complete: string }): Promise<HttpFloor> {
    const floor = await HttpFloor.start(bodies, join(this.workDir, 'http-floor.log'));
    this.live.add(floor);
    return floor;
  }

  /** The stack floor (the HTTP floor's routes running the floor's SQL) on this run's database and scope. */
  async startStackFloor(bodies: { begin: string; complete: string }, poolMax: number): Promise<HttpFloor> {
    const floor = await HttpFloor.start(bodies, join(this.workDir, 'stack-floor.log'), {
      databaseUrl: this.db.url,
      scope: this.scope,
      poolMax,
    });
    this.live.add(floor);
    return floor;
  }

  async stopHttpFloor(floor: HttpFloor): Promise<void> {
    await floor.stop();
    this.live.delete(floor);
  }

  /**
   * `runs` rounds of one run per side, the order rotated each round so a
   * drifting machine biases none. Each side starts from a checkpoint.
   * Ratios are taken per round, then their median. With `round`, only that
   * round (its order rotated as in the full sequence), for a scenario that
   * interleaves the rounds of two such comparisons (S4).
   */
  async sides(label: string, fns: SideRuns, round?: number): Promise<Sides> {
    const names = (Object.keys(SIDE_LABEL) as Side[]).filter((k) => fns[k]);
    const out: Partial<Record<Side, MeasuredLoad[]>> = {};
    const rounds = round === undefined ? [...Array(this.cfg.runs).keys()] : [round];
    for (const r of rounds) {
      const order = names.map((_, i) => names[(i + r) % names.length]!);
      for (const side of order) {
        await this.db.checkpoint();
        const m = await fns[side]!(this.nextRun());
        out[side] = [...(out[side] ?? []), m];
        this.log(`${label} run ${r + 1}/${this.cfg.runs} ${SIDE_LABEL[side]}: ${fmtLoad(m)}`);
      }
    }
    return out as Sides;
  }

  /**
   * Closes the service's idle database connections before a pgbench run, so
   * the two never hold connections at once (64 + 64 would pass a default
   * max_connections of 100). The pool drops them and reconnects during the
   * next warm-up, as it does after any server-side disconnect.
   */
  async releaseServiceConnections(): Promise<void> {
    const gone = `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE datname = current_database() AND application_name = 'idem'`;
    await this.db.query(
      `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
       WHERE datname = current_database() AND application_name = 'idem'`,
    );
    for (let i = 0; i < 50 && (await this.db.query<{ n: number }>(gone))[0]!.n > 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * `runs` pairs of one service run and one reference run, alternating which
   * goes first so a drifting machine biases neither. Each side starts from a
   * checkpoint. The ratio of each pair is taken, then the median of ratios.
   */
  async paired<S extends MeasuredLoad, R extends MeasuredLoad>(
    label: string,
    service: (run: number) => Promise<S>,
    reference: (run: number) => Promise<R>,
  ): Promise<{ service: S[]; reference: R[] }> {
    const out = { service: [] as S[], reference: [] as R[] };
    for (let r = 0; r < this.cfg.runs; r++) {
      const order = r % 2 === 0 ? ['service', 'reference'] : ['reference', 'service'];
      for (const side of order) {
        await this.db.checkpoint();
        if (side === 'service') {
          const m = await service(this.nextRun());
          out.service.push(m);
          this.log(`${label} run ${r + 1}/${this.cfg.runs} service: ${fmtLoad(m)}`);
        } else {
          const m = await reference(this.nextRun());
          out.reference.push(m);
          this.log(`${label} run ${r + 1}/${this.cfg.runs} reference: ${fmtLoad(m)}`);
        }
      }
    }
    return out;
  }
}

export type Side = 'service' | 'alone' | 'floor' | 'http' | 'stack' | 'sameSql';
export const SIDE_LABEL: Record<Side, string> = {
  service: 'service',
  alone: 'service, coalescing off (IDEM_DB_COALESCE=0)',
  floor: 'floor (pgbench -M prepared)',
  http: 'HTTP floor',
  stack: 'stack floor (HTTP floor + floor SQL)',
  sameSql: 'same SQL (pgbench)',
};
export type SideRuns = { service: (run: number) => Promise<MeasuredLoad> } & Partial<
  Record<Side, (run: number) => Promise<MeasuredLoad>>
>;
export type Sides = { service: MeasuredLoad[] } & Partial<Record<Side, MeasuredLoad[]>>;

/** `f` of each run of `a` over `f` of the same round's run of `b`: the paired ratio, its median [min–max]. */
export const perRun = (a: MeasuredLoad[], b: MeasuredLoad[] | undefined, f: (m: MeasuredLoad) => number) =>
  b ? spread(a.map((m, i) => f(m) / f(b[i]!))) : undefined;
const over = (ms: MeasuredLoad[] | undefined, f: (m: MeasuredLoad) => number) =>
  ms ? spread(ms.map(f)) : undefined;

type Cpu = NonNullable<MeasuredLoad['cpu']>;
/** One CPU figure of a run, NaN when that run was not metered. */
const cpuOf = (g: (c: Cpu) => number | undefined) => (m: MeasuredLoad) =>
  m.cpu ? (g(m.cpu) ?? Number.NaN) : Number.NaN;

/** A figure: its name, its unit, and how to read it off one run. */
export type Figure = [string, string, (m: MeasuredLoad) => number];

/** CPU ms per `op` of each process, as figures. */
export function cpuFigures(op: string): Figure[] {
  return [
    [`CPU ms per ${op}: service process`, 'ms', cpuOf((c) => c.serviceMs)],
    [`CPU ms per ${op}: Postgres backends`, 'ms', cpuOf((c) => c.postgresMs)],
    [`CPU ms per ${op}: load generator`, 'ms', cpuOf((c) => c.driverMs)],
  ];
}

/**
 * The service against a reference the table has no column of its own for,
 * in rows that name it (`reference: ...`), each with its per-run ratio.
 */
export function referenceRows(
  id: string,
  scenario: string,
  reference: string,
  service: MeasuredLoad[],
  ref: MeasuredLoad[],
  figures: Figure[],
): Row[] {
  return figures.map(([figure, unit, f]) => ({
    id,
    scenario,
    figure: `${figure} (reference: ${reference})`,
    unit,
    service: over(service, f),
    reference: over(ref, f),
    ratio: perRun(service, ref, f),
  }));
}

/** Rate, p50 and p99 of the service next to each reference measured, with the ratios. */
export function figureRows(id: string, scenario: string, unit: string, s: Sides): Row[] {
  return sideRows(id, scenario, s, [
    [unit, '/s', (m) => m.perSecond],
    ['p50', 'ms', (m) => m.latency.p50],
    ['p99', 'ms', (m) => m.latency.p99],
  ]);
}

/** Each figure of the service next to each reference measured (floor, HTTP floor, same SQL), with the ratios. */
export function sideRows(id: string, scenario: string, s: Sides, figures: Figure[]): Row[] {
  return figures.map(([figure, u, f]) => ({
    id,
    scenario,
    figure,
    unit: u,
    service: over(s.service, f),
    reference: over(s.floor, f),
    ratio: perRun(s.service, s.floor, f),
    http: over(s.http, f),
    httpRatio: perRun(s.service, s.http, f),
    sameSql: over(s.sameSql, f),
  }));
}

/** CPU milliseconds per operation by process, for the sides that were metered. */
export function sideCpuRows(id: string, scenario: string, op: string, s: Sides): Row[] {
  if (!s.service.every((m) => m.cpu)) return [];
  const row = (figure: string, g: (c: Cpu) => number | undefined, refs: Side[]): Row => ({
    id,
    scenario,
    figure: `CPU ms per ${op}: ${figure}`,
    unit: 'ms',
    service: over(s.service, cpuOf(g)),
    ...(refs.includes('floor') && {
      reference: over(s.floor, cpuOf(g)),
      ratio: perRun(s.service, s.floor, cpuOf(g)),
    }),
    ...(refs.includes('http') && {
      http: over(s.http, cpuOf(g)),
      httpRatio: perRun(s.service, s.http, cpuOf(g)),
    }),
    ...(refs.includes('sameSql') && { sameSql: over(s.sameSql, cpuOf(g)) }),
  });
  return [
    row('service process (HTTP floor: its process)', (c) => c.serviceMs, ['http']),
    row('Postgres backends', (c) => c.postgresMs, ['floor', 'sameSql']),
    row('load generator (undici; pgbench)', (c) => c.driverMs, ['floor', 'http', 'sameSql']),
  ];
}

export function fmtLoad(m: MeasuredLoad): string {
  const err = m.errors ? `, ${m.errors} errors (${m.errorSamples.join('; ')})` : '';
  return `${m.perSecond.toFixed(1)}/s, p50 ${m.latency.p50.toFixed(2)} ms, p99 ${m.latency.p99.toFixed(2)} ms, n=${m.completed}${err}`;
}

/** The standard rows of a paired throughput figure: rate, p50, p99, each with its ratio. */
export function pairedRows(
  id: string,
  scenario: string,
  unit: string,
  p: { service: MeasuredLoad[]; reference: MeasuredLoad[] },
): Row[] {
  const ratio = (f: (m: MeasuredLoad) => number) =>
    spread(p.service.map((s, i) => f(s) / f(p.reference[i]!)));
  const rate = (m: MeasuredLoad) => m.perSecond;
  const p50 = (m: MeasuredLoad) => m.latency.p50;
  const p99 = (m: MeasuredLoad) => m.latency.p99;
  return [
    {
      id,
      scenario,
      figure: unit,
      unit: '/s',
      service: spread(p.service.map(rate)),
      reference: spread(p.reference.map(rate)),
      ratio: ratio(rate),
    },
    {
      id,
      scenario,
      figure: 'p50',
      unit: 'ms',
      service: spread(p.service.map(p50)),
      reference: spread(p.reference.map(p50)),
      ratio: ratio(p50),
    },
    {
      id,
      scenario,
      figure: 'p99',
      unit: 'ms',
      service: spread(p.service.map(p99)),
      reference: spread(p.reference.map(p99)),
      ratio: ratio(p99),
    },
  ];
}

/** Errors on either side make a figure meaningless: say so in the notes. */
export function errorNotes(label: string, loads: MeasuredLoad[]): string[] {
  const bad = loads.filter((m) => m.errors > 0);
  if (bad.length === 0) return [];
  const samples = [...new Set(bad.flatMap((m) => m.errorSamples))].slice(0, 3);
  return [
    `${label}: ${bad.reduce((a, m) => a + m.errors, 0)} failed requests in ${bad.length} runs (${samples.join('; ')})`,
  ];
}
