/**
 * S8: begin + complete in an open loop, at a fixed arrival rate of half of
 * S1's measured maximum at `scenarioClients` clients (or `BENCH_OPEN_RATE`).
 * Latency is measured from each arrival's scheduled time (`open-loop.ts`),
 * so it is free of coordinated omission: this is where latency targets are
 * judged. The floor runs the floor's cycle at the same rate (`pgbench -R`,
 * which also measures from the schedule), with the same connections. The
 * HTTP floor (a bare fastify route, no database) takes the same arrivals from
 * the same driver: what the driver, two HTTP round trips and this machine's
 * stalls give on their own, without any database. The stack floor takes
 * them too: the HTTP floor's routes each running the floor's SQL first, the
 * two halves of the service's path in series (`stack-floor-server.ts`).
 */
import {
  type Bench,
  cpuFigures,
  errorNotes,
  type Figure,
  type Row,
  referenceRows,
  type ScenarioResult,
  type Sides,
  sideCpuRows,
  sideRows,
} from '../lib/bench.js';
import { floorCycleScript } from '../lib/floor.js';
import { floorCycle, type HttpFloor, sampleAnswers } from '../lib/http-floor.js';
import { beginCompleteCycle, type Cycle, closedLoop } from '../lib/http-load.js';
import { LATE_MS, type OpenLoopResult, openLoop } from '../lib/open-loop.js';
import { runPgbench } from '../lib/pgbench.js';
import { spread } from '../lib/stats.js';
import { prime } from './s1-cycle.js';

export async function runS8(b: Bench): Promise<ScenarioResult> {
  const clients = b.cfg.scenarioClients;
  const notes: string[] = [];
  const svc = await b.startService(clients + 1);
  let httpFloor: HttpFloor | undefined;
  let stackFloor: HttpFloor | undefined;
  try {
    await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime8'));
    const answers = await sampleAnswers(svc.url, b.scope);
    httpFloor = await b.startHttpFloor(answers);
    stackFloor = await b.startStackFloor(answers, clients + 1);
    await prime(b, stackFloor, clients, floorCycle(b.scope, 'prime8s'));
    const http = httpFloor;
    const stack = stackFloor;
    let max = b.s1Rate.get(clients);
    if (b.cfg.openRate === 0 && max === undefined) {
      // S1 did not run at this client count: measure its maximum here, once.
      const m = await closedLoop({
        url: svc.url,
        clients,
        warmupMs: b.cfg.warmupSeconds * 1000,
        measureMs: b.cfg.seconds * 1000,
        cycle: beginCompleteCycle(b.scope, 's8max'),
      });
      max = m.perSecond;
      notes.push(`S8: S1's maximum at ${clients} clients measured here, one run: ${max.toFixed(0)} cycles/s`);
    }
    const rate = Math.max(1, Math.round(b.cfg.openRate || max! / 2));
    const how = b.cfg.openRate
      ? 'BENCH_OPEN_RATE'
      : `half of S1's ${max!.toFixed(0)} cycles/s at ${clients} clients`;
    b.log(`S8: ${rate} cycles/s (${how})`);
    const open = (url: string, pid: number, cycle: Cycle) =>
      openLoop({
        url,
        rate,
        warmupMs: b.cfg.warmupSeconds * 1000,
        measureMs: b.cfg.seconds * 1000,
        maxConnections: b.cfg.openConnections,
        cycle,
        cpu: b.serviceCpu(pid),
      });
    const p = await b.sides(`S8 ${rate}/s`, {
      service: (run) => open(svc.url, svc.pid, beginCompleteCycle(b.scope, `s8-${run}`)),
      http: (run) => open(http.url, http.pid, floorCycle(b.scope, `s8h-${run}`)),
      stack: (run) => open(stack.url, stack.pid, floorCycle(b.scope, `s8s-${run}`)),
      floor: async (run) => {
        await b.releaseServiceConnections();
        return runPgbench({
          url: b.db.url,
          script: floorCycleScript(b.scope, `s8f-${run}`, run),
          clients,
          mode: 'prepared',
          rate,
          workDir: b.workDir,
          warmupSeconds: b.cfg.warmupSeconds,
          seconds: b.cfg.seconds,
          cpu: b.pgbenchCpu,
        });
      },
    });
    const scenario = `open loop, ${rate} cycles/s (${how}); floor: pgbench -R at ${clients} connections; HTTP floor and stack floor: the same driver`;
    return {
      id: 'S8',
      rows: [
        ...rows(b, rate, scenario, p),
        ...sideCpuRows('S8', scenario, 'cycle', p),
        // The stack floor: both halves of the service's path (the HTTP floor and the
        // floor) in series, so the latency target reads against what any service on
        // this stack pays for the same durable work.
        ...referenceRows(
          'S8',
          scenario,
          "the stack floor, a bare route running the floor's SQL",
          p.service,
          p.stack!,
          [...FIGURES, ...cpuFigures('cycle')],
        ),
      ],
      detail: { rate, how, ...p },
      notes: [
        ...notes,
        ...errorNotes('S8 service', p.service),
        ...errorNotes('S8 HTTP floor', p.http!),
        ...errorNotes('S8 stack floor', p.stack!),
      ],
    };
  } finally {
    await b.stopService(svc);
    if (httpFloor) await b.stopHttpFloor(httpFloor);
    if (stackFloor) await b.stopHttpFloor(stackFloor);
  }
}

/** The rate achieved and a cycle's latency from its scheduled time, against every reference. */
const FIGURES: Figure[] = [
  ['cycles/s achieved', '/s', (m) => m.perSecond],
  ['begin+complete p50, from the scheduled time', 'ms', (m) => m.latency.p50],
  ['begin+complete p99, from the scheduled time', 'ms', (m) => m.latency.p99],
  ['begin+complete p99.9, from the scheduled time', 'ms', (m) => m.latency.p999],
];

function rows(b: Bench, rate: number, scenario: string, p: Sides): Row[] {
  const svc = p.service as OpenLoopResult[];
  const http = p.http as OpenLoopResult[];
  return [
    ...sideRows('S8', scenario, p, FIGURES),
    {
      id: 'S8',
      scenario,
      figure: `late starts (> ${LATE_MS} ms after schedule), of ${Math.round(rate * b.cfg.seconds)} per run`,
      unit: '',
      service: spread(svc.map((m) => m.lateStarts)),
      http: spread(http.map((m) => m.lateStarts)),
    },
    {
      id: 'S8',
      scenario,
      figure: 'start lag p99 (scheduled -> sent)',
      unit: 'ms',
      service: spread(svc.map((m) => m.startLag.p99)),
      http: spread(http.map((m) => m.startLag.p99)),
    },
    {
      id: 'S8',
      scenario,
      figure: 'HTTP connections opened by the driver',
      unit: '',
      service: spread(svc.map((m) => m.connections)),
      http: spread(http.map((m) => m.connections)),
    },
  ];
}
