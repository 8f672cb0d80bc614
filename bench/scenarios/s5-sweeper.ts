/**
 * S5: the service's own sweeper (default settings: a pass about every
 * second, batches of 500, at most 4 batches a pass) draining
 * `expiredLeases` expired leases while S1 runs. One service process for all
 * runs; per run: S1 "before" (warm-up + window); the leases are inserted by
 * SQL; S1 "during" runs from the insert's commit until no lapse is due, or
 * until the cap (then the drain time is projected from the observed rate and
 * the remaining runs are skipped: they would only repeat it). The drain is
 * watched from outside with the service's own lapse expressions.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { loadConfig } from '../../src/config.js';
import { postgresDatabase } from '../../src/db/database.js';
import { canonicalJson, fingerprintOf } from '../../src/ledger/json-value.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { type Bench, errorNotes, type Row, type ScenarioResult } from '../lib/bench.js';
import { beginCompleteCycle, closedLoop, type MeasuredLoad } from '../lib/http-load.js';
import { REQUEST } from '../lib/statements.js';
import { spread } from '../lib/stats.js';
import { prime } from './s1-cycle.js';

/**
 * After a capped run the backlog must not spill into the next scenario: it is
 * swept here with the service's own `sweepOnce`, after an ANALYZE (with
 * fresh statistics the lapse statement gets a sane plan).
 */
async function finishBacklog(b: Bench, tag: string): Promise<void> {
  await b.db.query('ANALYZE idem_operations');
  const settings = loadConfig({});
  const db = postgresDatabase(b.db.url, settings.db);
  try {
    const deadline = Date.now() + 600_000;
    while ((await b.db.lapseDue(b.scope, tag)) && Date.now() < deadline)
      await sweepOnce(db, settings.sweep, 'bench');
  } finally {
    await db.close();
  }
}

interface SweepRun {
  tag: string;
  before: MeasuredLoad;
  during: MeasuredLoad;
  /** Seconds until no lapse was due, or, when the cap was hit, the projection at the observed rate. */
  drainSeconds: number;
  drained: boolean;
  /** Leases lapsed per second over the watched time. */
  perSecond: number;
  lapsedTo: Record<string, number>;
}

export async function runS5(b: Bench): Promise<ScenarioResult> {
  const clients = b.cfg.scenarioClients;
  const total = b.cfg.expiredLeases;
  const capMs = b.cfg.drainCapSeconds * 1000;
  const request = canonicalJson(REQUEST, 'request', Number.MAX_SAFE_INTEGER);
  const fingerprint = fingerprintOf(request);
  const runs: SweepRun[] = [];
  const notes: string[] = [];
  const svc = await b.startService(clients + 1);
  try {
    // The drains write WAL ten times as fast as S1 alone: start them from the WAL files a
    // server under steady load keeps for reuse, not from the few that the paired figures'
    // checkpoints leave (`steadyWalFiles`). Before the priming, which pays the full-page
    // images that follow its CHECKPOINT, so that the first "before" window does not.
    const t0 = Date.now();
    const wal = await b.db.steadyWalFiles();
    const walNote = `S5: WAL files ahead for reuse ${wal.before} -> ${wal.after} (${wal.switched} switched, then CHECKPOINT; ${Date.now() - t0} ms)`;
    b.log(walNote);
    notes.push(walNote);
    await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime5'));
    for (let r = 0; r < b.cfg.runs; r++) {
      // No CHECKPOINT here (unlike the paired figures): the writes right after one
      // pay full-page images, which would make "before" look worse than "during".
      const run = b.nextRun();
      const before = await closedLoop({
        url: svc.url,
        clients,
        warmupMs: b.cfg.warmupSeconds * 1000,
        measureMs: b.cfg.seconds * 1000,
        cycle: beginCompleteCycle(b.scope, `s5b-${run}`),
        cpu: b.serviceCpu(svc.pid),
      });
      const tag = `expired-${run}`;
      const t = Date.now();
      await b.db.insertExpiredLeases(b.scope, tag, total, fingerprint, request);
      const insertedAt = Date.now();
      let drainedAt: number | undefined;
      const watch = (async () => {
        while (drainedAt === undefined && Date.now() - insertedAt < capMs) {
          if (!(await b.db.lapseDue(b.scope, tag))) drainedAt = Date.now();
          else await sleep(200);
        }
      })();
      const during = await closedLoop({
        url: svc.url,
        clients,
        warmupMs: 0,
        measureMs: capMs,
        until: () => drainedAt !== undefined,
        cycle: beginCompleteCycle(b.scope, `s5d-${run}`),
        cpu: b.serviceCpu(svc.pid),
      });
      await watch;
      const watched = ((drainedAt ?? Date.now()) - insertedAt) / 1000;
      const lapsedTo = await b.db.countByStatus(b.scope, tag);
      const done = total - (lapsedTo.in_progress ?? 0);
      const perSecond = done / watched;
      const m: SweepRun = {
        tag,
        before,
        during,
        drained: drainedAt !== undefined,
        drainSeconds: drainedAt !== undefined ? watched : total / perSecond,
        perSecond,
        lapsedTo,
      };
      runs.push(m);
      b.log(
        `S5 run ${r + 1}/${b.cfg.runs}: insert ${insertedAt - t} ms, ` +
          (m.drained
            ? `drained in ${watched.toFixed(1)} s`
            : `NOT drained after ${watched.toFixed(0)} s: ${done} of ${total} lapsed, projected ${m.drainSeconds.toFixed(0)} s`) +
          ` ${JSON.stringify(lapsedTo)}; p99 before ${before.latency.p99.toFixed(1)} ms, during ${during.latency.p99.toFixed(1)} ms; cycles/s ${before.perSecond.toFixed(0)} -> ${during.perSecond.toFixed(0)}`,
      );
      if (!m.drained) {
        notes.push(
          `S5 run ${run}: not drained within the ${b.cfg.drainCapSeconds} s cap (BENCH_DRAIN_CAP_SECONDS): ${done} of ${total} lapsed at ${perSecond.toFixed(0)}/s; the drain time shown is the projection at that rate`,
        );
      } else {
        const half = total / 2;
        if (
          Math.abs((lapsedTo.ready ?? 0) - half) > 1 ||
          Math.abs((lapsedTo.outcome_unknown ?? 0) - half) > 1
        ) {
          notes.push(
            `S5 run ${run}: expected half ready, half outcome_unknown, got ${JSON.stringify(lapsedTo)}`,
          );
        }
      }
      notes.push(...errorNotes(`S5 run ${run}`, [before, during]));
      if (!m.drained) break;
    }
  } finally {
    await b.stopService(svc);
  }
  const capped = runs.find((r) => !r.drained);
  if (capped) {
    const t = Date.now();
    await finishBacklog(b, capped.tag);
    b.log(`S5: the rest of the backlog was swept off the clock in ${Date.now() - t} ms (after ANALYZE)`);
  }
  const scenario = `sweeper drains ${total.toLocaleString('en')} expired leases under S1 at ${clients} clients`;
  const rows: Row[] = [
    {
      id: 'S5',
      scenario,
      figure: runs.every((r) => r.drained) ? 'seconds to drain' : 'seconds to drain (PROJECTED: cap hit)',
      unit: 's',
      service: spread(runs.map((r) => r.drainSeconds)),
    },
    {
      id: 'S5',
      scenario,
      figure: 'leases lapsed per second',
      unit: '/s',
      service: spread(runs.map((r) => r.perSecond)),
    },
    {
      id: 'S5',
      scenario,
      figure: 'S1 p99: during the drain (service) vs before (reference)',
      unit: 'ms',
      service: spread(runs.map((r) => r.during.latency.p99)),
      reference: spread(runs.map((r) => r.before.latency.p99)),
      ratio: spread(runs.map((r) => r.during.latency.p99 / r.before.latency.p99)),
    },
    {
      id: 'S5',
      scenario,
      figure: 'S1 cycles/s: during the drain (service) vs before (reference)',
      unit: '/s',
      service: spread(runs.map((r) => r.during.perSecond)),
      reference: spread(runs.map((r) => r.before.perSecond)),
      ratio: spread(runs.map((r) => r.during.perSecond / r.before.perSecond)),
    },
  ];
  // The host's own stalls: a disk that stalls every task shows here whether the sweeper ran or not.
  for (const [kind, figure] of [
    ['ioSome', 'host I/O pressure, some (share of the window in which a task waited on I/O)'],
    ['ioFull', 'host I/O pressure, full (share of the window in which every task waited on I/O)'],
  ] as const) {
    const during = runs.map((r) => r.during.cpu?.[kind]);
    const before = runs.map((r) => r.before.cpu?.[kind]);
    if (runs.length === 0 || [...during, ...before].some((v) => v === undefined)) continue;
    rows.push({
      id: 'S5',
      scenario,
      figure: `${figure}: during the drain (service) vs before (reference)`,
      unit: '%',
      service: spread(during.map((v) => 100 * (v ?? 0))),
      reference: spread(before.map((v) => 100 * (v ?? 0))),
    });
  }
  return { id: 'S5', rows, detail: runs, notes };
}
