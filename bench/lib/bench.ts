/**
 * What every scenario gets: settings, the database, the built service, a
 * scratch directory, and the paired service-vs-pgbench measurement that
 * every ratio comes from.
 */
import { join } from 'node:path';
import type { BenchConfig } from './config.js';
import { type CpuWindow, cpuWindow } from './cpu.js';
import type { BenchDatabase } from './database.js';
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
  reference?: Spread;
  ratio?: Spread;
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
  /** Every service process started, for cleanup on an abort. */
  readonly live = new Set<Service>();

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

  async startService(poolMax: number, env?: Record<string, string>): Promise<Service> {
    const svc = await Service.start({
      build: this.build,
      databaseUrl: this.db.url,
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
          this.log(`${label} run ${r + 1}/${this.cfg.runs} pgbench: ${fmtLoad(m)}`);
        }
      }
    }
    return out;
  }
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

/** CPU milliseconds per operation, by process, when both sides were metered. */
export function cpuRows(
  id: string,
  scenario: string,
  op: string,
  p: { service: MeasuredLoad[]; reference: MeasuredLoad[] },
): Row[] {
  if (!p.service.every((m) => m.cpu) || !p.reference.every((m) => m.cpu)) return [];
  const side = (ms: MeasuredLoad[], f: (c: NonNullable<MeasuredLoad['cpu']>) => number | undefined) =>
    spread(ms.map((m) => f(m.cpu!) ?? Number.NaN));
  const pairRatio = (f: (c: NonNullable<MeasuredLoad['cpu']>) => number | undefined) =>
    spread(p.service.map((m, i) => (f(m.cpu!) ?? Number.NaN) / (f(p.reference[i]!.cpu!) ?? Number.NaN)));
  const pg = (c: NonNullable<MeasuredLoad['cpu']>) => c.postgresMs;
  const driver = (c: NonNullable<MeasuredLoad['cpu']>) => c.driverMs;
  return [
    {
      id,
      scenario,
      figure: `CPU ms per ${op}: service process`,
      unit: 'ms',
      service: side(p.service, (c) => c.serviceMs),
    },
    {
      id,
      scenario,
      figure: `CPU ms per ${op}: Postgres backends`,
      unit: 'ms',
      service: side(p.service, pg),
      reference: side(p.reference, pg),
      ratio: pairRatio(pg),
    },
    {
      id,
      scenario,
      figure: `CPU ms per ${op}: load generator (undici; pgbench)`,
      unit: 'ms',
      service: side(p.service, driver),
      reference: side(p.reference, driver),
      ratio: pairRatio(driver),
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
