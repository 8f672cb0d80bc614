/**
 * S1: begin (new key) + complete at each client count, against pgbench on
 * the same two statements. S7 comes from the same service processes: one
 * per client count (pool sized to the clients), so its VmHWM is the peak RSS
 * under that load.
 */
import { type Bench, cpuRows, errorNotes, pairedRows, type Row, type ScenarioResult } from '../lib/bench.js';
import { beginCompleteCycle, type Cycle, closedLoop, type MeasuredLoad } from '../lib/http-load.js';
import { runPgbench } from '../lib/pgbench.js';
import { cycleScript } from '../lib/scripts.js';
import type { Service } from '../lib/service.js';
import { spread } from '../lib/stats.js';

export type CyclePairs = { service: MeasuredLoad[]; reference: MeasuredLoad[] };

/** Memory of the service process that served all runs of one client count. */
export interface ServiceMemory {
  peakKiB: number;
  idleKiB: number;
}

/** Load right after a service starts, unmeasured: JIT, lazily built serializers, the pool. */
export async function prime(b: Bench, svc: Service, clients: number, cycle: Cycle): Promise<void> {
  if (b.cfg.primeSeconds <= 0) return;
  await closedLoop({ url: svc.url, clients, warmupMs: 0, measureMs: b.cfg.primeSeconds * 1000, cycle });
}

/** One service run of S1: warm-up, then the measured window. */
export async function serviceCycles(
  b: Bench,
  svc: Service,
  clients: number,
  run: number,
): Promise<MeasuredLoad> {
  return closedLoop({
    url: svc.url,
    clients,
    warmupMs: b.cfg.warmupSeconds * 1000,
    measureMs: b.cfg.seconds * 1000,
    cycle: beginCompleteCycle(b.scope, `svc-${run}`),
    cpu: b.serviceCpu(svc.pid),
  });
}

/** One pgbench run of S1; checks that every transaction left a succeeded operation. */
export async function referenceCycles(b: Bench, clients: number, run: number, notes: string[]) {
  const tag = `pgb-${run}`;
  const r = await runPgbench({
    url: b.db.url,
    script: cycleScript(b.scope, tag, run),
    clients,
    mode: b.cfg.pgbenchMode,
    workDir: b.workDir,
    warmupSeconds: b.cfg.warmupSeconds,
    seconds: b.cfg.seconds,
    cpu: b.pgbenchCpu,
  });
  const counts = await b.db.countByStatus(b.scope, tag);
  // pgbench may stop mid-transaction at -T: at most one begun-not-completed per client.
  const succeeded = counts.succeeded ?? 0;
  const open = counts.in_progress ?? 0;
  if (succeeded < r.processed || open > clients) {
    notes.push(
      `pgbench run ${run}: ${r.processed} transactions but ${JSON.stringify(counts)}: the reference is not completing its operations`,
    );
  }
  return r;
}

/**
 * The paired S1 runs at one client count, against one service process
 * (pool = clients + 1, primed) that serves every service run, or against
 * `service` when given; its connections are closed before each pgbench run.
 */
export async function measureCycles(
  b: Bench,
  clients: number,
  label: string,
  notes: string[],
  service?: Service,
): Promise<CyclePairs & { memory: ServiceMemory }> {
  const svc = service ?? (await b.startService(clients + 1));
  try {
    if (!service) await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime'));
    const p = await b.paired(
      label,
      (run) => serviceCycles(b, svc, clients, run),
      async (run) => {
        await b.releaseServiceConnections();
        return referenceCycles(b, clients, run, notes);
      },
    );
    return { ...p, memory: { peakKiB: await svc.peakKiB(), idleKiB: svc.idleKiB } };
  } finally {
    if (!service) await b.stopService(svc);
  }
}

export interface S1Output {
  s1: ScenarioResult;
  s7: ScenarioResult;
  /** Kept for S4's "empty ledger" baseline. */
  pairs: Map<number, CyclePairs>;
}

export async function runS1(b: Bench): Promise<S1Output> {
  const rows: Row[] = [];
  const s7rows: Row[] = [];
  const notes: string[] = [];
  const pairs = new Map<number, CyclePairs>();
  const memory = new Map<number, ServiceMemory>();
  for (const clients of b.cfg.clients) {
    const p = await measureCycles(b, clients, `S1 ${clients} clients`, notes);
    pairs.set(clients, p);
    const scenario = `begin (new key) + complete, ${clients} clients`;
    rows.push(...pairedRows('S1', scenario, 'cycles/s', p), ...cpuRows('S1', scenario, 'cycle', p));
    notes.push(...errorNotes(`S1 ${clients} clients, service`, p.service));
    const mib = (k: number) => k / 1024;
    memory.set(clients, p.memory);
    s7rows.push(
      {
        id: 'S7',
        scenario: `service RSS under S1, ${clients} clients`,
        figure: `peak RSS (VmHWM over all ${b.cfg.runs} runs)`,
        unit: 'MiB',
        service: spread([mib(p.memory.peakKiB)]),
      },
      {
        id: 'S7',
        scenario: `service RSS under S1, ${clients} clients`,
        figure: 'RSS when ready, before any load',
        unit: 'MiB',
        service: spread([mib(p.memory.idleKiB)]),
      },
    );
  }
  const detail = Object.fromEntries([...pairs].map(([c, p]) => [c, p]));
  return {
    s1: { id: 'S1', rows, detail, notes },
    s7: {
      id: 'S7',
      rows: s7rows,
      detail: Object.fromEntries(memory),
      notes: [],
    },
    pairs,
  };
}
