/**
 * S1: begin (new key) + complete at each client count, next to the floor
 * (the least SQL for the same work, `pgbench -M prepared`), the HTTP floor
 * (a bare fastify route, same requests, same driver) and the same-SQL
 * diagnostic (pgbench on the service's own statements). S7 comes from the
 * same service processes: one per client count (pool sized to the
 * clients), so its VmHWM is the peak RSS under that load.
 */
import {
  type Bench,
  errorNotes,
  figureRows,
  type Row,
  type ScenarioResult,
  type SideRuns,
  type Sides,
  sideCpuRows,
} from '../lib/bench.js';
import { cpuWindow } from '../lib/cpu.js';
import { floorCycleScript } from '../lib/floor.js';
import { floorCycle, type HttpFloor, sampleAnswers } from '../lib/http-floor.js';
import { beginCompleteCycle, type Cycle, closedLoop, type MeasuredLoad } from '../lib/http-load.js';
import { type PgbenchScript, runPgbench } from '../lib/pgbench.js';
import { cycleScript } from '../lib/scripts.js';
import type { Service } from '../lib/service.js';
import { spread } from '../lib/stats.js';

/** Memory of the service process that served all runs of one client count. */
export interface ServiceMemory {
  peakKiB: number;
  idleKiB: number;
}

/** Load right after a service starts, unmeasured: JIT, lazily built serializers, the pool. */
export async function prime(b: Bench, svc: { url: string }, clients: number, cycle: Cycle): Promise<void> {
  if (b.cfg.primeSeconds <= 0) return;
  await closedLoop({ url: svc.url, clients, warmupMs: 0, measureMs: b.cfg.primeSeconds * 1000, cycle });
  // A scenario's stand-in VACUUM (ANALYZE) runs before it, on a ledger that may be
  // nearly empty (a fresh database: S1, or any scenario run alone). Statistics of a
  // near-empty table make a sequential scan every statement's cheapest plan, and a
  // connection keeps the generic plan it made then until the next ANALYZE, however
  // large the table grows: folded statements of 0.1 to 1 s on one connection in
  // S5-only runs. Autovacuum would have analyzed the ledger again as priming grew it
  // (after 50 rows and 10%), so the stand-in does too. (The service's sweeper now
  // analyzes a young ledger that has grown as well: ledger/young-tables.ts.)
  if (b.standInVacuum) await b.db.query('ANALYZE idem_operations, idem_events');
}

/** One closed-loop run against `url`: warm-up, then the measured window. */
export function httpRun(
  b: Bench,
  url: string,
  pid: number,
  clients: number,
  cycle: Cycle,
): Promise<MeasuredLoad> {
  return closedLoop({
    url,
    clients,
    warmupMs: b.cfg.warmupSeconds * 1000,
    measureMs: b.cfg.seconds * 1000,
    cycle,
    cpu: cpuWindow(b.db, () => undefined, pid),
  });
}

/** One timed pgbench run on the bench database. */
export function pgbenchRun(b: Bench, script: PgbenchScript, clients: number, mode = b.cfg.pgbenchMode) {
  return runPgbench({
    url: b.db.url,
    script,
    clients,
    mode,
    workDir: b.workDir,
    warmupSeconds: b.cfg.warmupSeconds,
    seconds: b.cfg.seconds,
    cpu: b.pgbenchCpu,
  });
}

/** A pgbench cycle run (floor or same SQL); checks that every transaction left a succeeded operation. */
export async function pgbenchCycles(
  b: Bench,
  clients: number,
  tag: string,
  script: PgbenchScript,
  notes: string[],
  mode = b.cfg.pgbenchMode,
) {
  await b.releaseServiceConnections();
  const r = await pgbenchRun(b, script, clients, mode);
  const counts = await b.db.countByStatus(b.scope, tag);
  // pgbench may stop mid-transaction at -T: at most one begun-not-completed per client.
  if ((counts.succeeded ?? 0) < r.processed || (counts.in_progress ?? 0) > clients) {
    notes.push(
      `pgbench ${tag}: ${r.processed} transactions but ${JSON.stringify(counts)}: not completing its operations`,
    );
  }
  return r;
}

export interface CycleOptions {
  /** The service to use (else one is started, primed and stopped). */
  service?: Service;
  /** Also measure a second service with coalescing off (`IDEM_DB_COALESCE=0`), the setting's A/B. */
  alone?: Service;
  /** Also measure the HTTP floor. */
  httpFloor?: HttpFloor;
  /** Also run the same-SQL diagnostic (default true). */
  sameSql?: boolean;
  /** Only this round of the `runs` (see `Bench.sides`); all of them when absent. */
  round?: number;
}

/**
 * The S1 runs at one client count: the service (one process serves every
 * run; its connections are closed before each pgbench run), the floor, and
 * the references asked for.
 */
export async function measureCycles(
  b: Bench,
  clients: number,
  label: string,
  notes: string[],
  o: CycleOptions = {},
): Promise<Sides & { memory: ServiceMemory }> {
  const svc = o.service ?? (await b.startService(clients + 1));
  try {
    if (!o.service) await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime'));
    const fns: SideRuns = {
      service: (run) => httpRun(b, svc.url, svc.pid, clients, beginCompleteCycle(b.scope, `svc-${run}`)),
      floor: (run) =>
        pgbenchCycles(
          b,
          clients,
          `flo-${run}`,
          floorCycleScript(b.scope, `flo-${run}`, run),
          notes,
          'prepared',
        ),
    };
    const alone = o.alone;
    if (alone) {
      // Two services' pools (at 64 clients, 65 connections each) would pass max_connections:
      // each service run starts with none open (the pool reconnects during its warm-up).
      fns.service = async (run) => {
        await b.releaseServiceConnections();
        return httpRun(b, svc.url, svc.pid, clients, beginCompleteCycle(b.scope, `svc-${run}`));
      };
      fns.alone = async (run) => {
        await b.releaseServiceConnections();
        return httpRun(b, alone.url, alone.pid, clients, beginCompleteCycle(b.scope, `alo-${run}`));
      };
    }
    const floor = o.httpFloor;
    if (floor)
      fns.http = (run) => httpRun(b, floor.url, floor.pid, clients, floorCycle(b.scope, `htf-${run}`));
    if (o.sameSql !== false) {
      fns.sameSql = (run) =>
        pgbenchCycles(b, clients, `pgb-${run}`, cycleScript(b.scope, `pgb-${run}`, run), notes);
    }
    const s = await b.sides(label, fns, o.round);
    return { ...s, memory: { peakKiB: await svc.peakKiB(), idleKiB: svc.idleKiB } };
  } finally {
    if (!o.service) await b.stopService(svc);
  }
}

/**
 * How much of the service's work was coalesced (`IDEM_DB_COALESCE`), from its
 * own metrics: the share of each statement's calls (by default begins and
 * completes) that shared a statement, over the process's life (priming and
 * every run).
 */
export async function coalescingNote(
  url: string,
  statements: Record<string, string> = { idem_begin_insert: 'new-key begins', idem_complete: 'completes' },
): Promise<string | undefined> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const count = (statement: string, sent: string) =>
    Number(
      text.match(
        new RegExp(`idem_db_coalesced_calls_total\\{statement="${statement}",sent="${sent}"\\} (\\d+)`),
      )?.[1] ?? 0,
    );
  const share = (statement: string) => {
    const folded = count(statement, 'folded');
    const all = folded + count(statement, 'alone');
    return all ? `${Math.round((100 * folded) / all)}%` : 'none';
  };
  const shares = Object.entries(statements).map(([st, label]) => [share(st), label] as const);
  if (shares.every(([s]) => s === 'none')) return 'coalescing off (no calls counted)';
  return `coalesced (folded into shared statements): ${shares.map(([s, label]) => `${s} of ${label}`).join(', ')}`;
}

export interface S1Output {
  s1: ScenarioResult;
  s7: ScenarioResult;
}

export async function runS1(b: Bench): Promise<S1Output> {
  const rows: Row[] = [];
  const s7rows: Row[] = [];
  const notes: string[] = [];
  const detail: Record<number, Sides> = {};
  const memory = new Map<number, ServiceMemory>();
  let floor: HttpFloor | undefined;
  try {
    for (const clients of b.cfg.clients) {
      const svc = await b.startService(clients + 1);
      let alone: Service | undefined;
      let p: Sides & { memory: ServiceMemory };
      try {
        await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime'));
        alone = await b.startService(clients + 1, { IDEM_DB_COALESCE: '0' });
        await prime(b, alone, clients, beginCompleteCycle(b.scope, 'prime-alone'));
        if (!floor) {
          const answers = await sampleAnswers(svc.url, b.scope);
          notes.push(
            `HTTP floor answers: begin ${answers.begin.length} B, complete ${answers.complete.length} B (the service's own sizes)`,
          );
          floor = await b.startHttpFloor(answers);
        }
        p = await measureCycles(b, clients, `S1 ${clients} clients`, notes, {
          service: svc,
          alone,
          httpFloor: floor,
        });
        const folded = await coalescingNote(svc.url);
        if (folded) notes.push(`S1 ${clients} clients: ${folded}`);
      } finally {
        await b.stopService(svc);
        if (alone) await b.stopService(alone);
      }
      detail[clients] = p;
      b.s1Rate.set(clients, spread(p.service.map((m) => m.perSecond)).median);
      const scenario = `begin (new key) + complete, ${clients} clients`;
      rows.push(...figureRows('S1', scenario, 'cycles/s', p), ...sideCpuRows('S1', scenario, 'cycle', p));
      if (p.alone) {
        const off = `${scenario}, coalescing off (IDEM_DB_COALESCE=0)`;
        const q = { service: p.alone, floor: p.floor, sameSql: p.sameSql };
        rows.push(...figureRows('S1', off, 'cycles/s', q), ...sideCpuRows('S1', off, 'cycle', q));
        const gain = spread(p.service.map((m, i) => m.perSecond / p.alone![i]!.perSecond));
        notes.push(
          `S1 ${clients} clients: coalescing on / off (the default against IDEM_DB_COALESCE=0, same rounds), cycles/s: ${gain.median.toFixed(2)} [${gain.min.toFixed(2)}–${gain.max.toFixed(2)}]`,
        );
        notes.push(...errorNotes(`S1 ${clients} clients, coalescing off`, p.alone));
      }
      notes.push(...errorNotes(`S1 ${clients} clients, service`, p.service));
      notes.push(...errorNotes(`S1 ${clients} clients, HTTP floor`, p.http ?? []));
      memory.set(clients, p.memory);
      const mib = (k: number) => spread([k / 1024]);
      const s7 = `service RSS under S1, ${clients} clients`;
      s7rows.push(
        {
          id: 'S7',
          scenario: s7,
          figure: `peak RSS (VmHWM over all ${b.cfg.runs} runs)`,
          unit: 'MiB',
          service: mib(p.memory.peakKiB),
        },
        {
          id: 'S7',
          scenario: s7,
          figure: 'RSS when ready, before any load',
          unit: 'MiB',
          service: mib(p.memory.idleKiB),
        },
      );
    }
  } finally {
    if (floor) await b.stopHttpFloor(floor);
  }
  return {
    s1: { id: 'S1', rows, detail, notes },
    s7: { id: 'S7', rows: s7rows, detail: Object.fromEntries(memory), notes: [] },
  };
}
