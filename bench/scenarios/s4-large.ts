/**
 * S4: S1 on a large ledger against S1 on an empty one. The empty ledger is a
 * database of its own, created here with the service's migrations, so that
 * the two halves run in alternating rounds (empty then large, then large then
 * empty, ...) and whatever the host does in those minutes falls on both
 * alike. (Run minutes apart, before and after the load, a host that slowed in
 * between once made a flat ledger look 27% slower than the floor's.) The
 * large ledger is the bench's database with `largeRows` operations and twice
 * as many events put in first. Each half has a service process of its own,
 * started and primed alike; the floor and same-SQL references run in every
 * round of both, so a slowdown can be told apart: Postgres' own (the floor
 * slows down too) or the service's (only it does).
 */

import {
  Bench,
  errorNotes,
  figureRows,
  perRun,
  type Row,
  type ScenarioResult,
  type Sides,
  sideCpuRows,
} from '../lib/bench.js';
import { BenchDatabase } from '../lib/database.js';
import { beginCompleteCycle, type MeasuredLoad } from '../lib/http-load.js';
import type { Service } from '../lib/service.js';
import { FINGERPRINT, REQUEST_TEXT, RESULT_TEXT } from '../lib/statements.js';
import { type Spread, spread } from '../lib/stats.js';
import { measureCycles, prime } from './s1-cycle.js';

export async function runS4(b: Bench): Promise<ScenarioResult> {
  const clients = b.cfg.scenarioClients;
  const notes: string[] = [];
  const emptyDb = await BenchDatabase.create(
    b.cfg.databaseUrl,
    `${b.db.name.replace(/^idem_bench_/, '')}empty`,
  );
  // Dropped with the rest if the bench is interrupted.
  const dropEmpty = { stop: () => emptyDb.drop() };
  b.live.add(dropEmpty);
  const empty = new Bench(b.cfg, emptyDb, b.build, b.workDir, b.scope);
  const services: Service[] = [];
  try {
    const loaded = await loadLarge(b);
    const large = await b.startService(clients + 1);
    services.push(large);
    const small = await b.startService(clients + 1, undefined, emptyDb.url);
    services.push(small);
    await prime(b, large, clients, beginCompleteCycle(b.scope, 'prime4'));
    await prime(empty, small, clients, beginCompleteCycle(b.scope, 'prime4'));
    // Both ledgers start vacuumed and analyzed, whatever the server's
    // autovacuum: the load left the bench's so, and the fresh one would
    // otherwise run on no statistics at all.
    await b.db.vacuumAnalyze();
    await emptyDb.vacuumAnalyze();
    const base: Sides = { service: [] };
    const big: Sides = { service: [] };
    for (let r = 0; r < b.cfg.runs; r++) {
      const halves = [
        { label: 'empty', bench: empty, other: b, svc: small, into: base },
        { label: 'large', bench: b, other: empty, svc: large, into: big },
      ];
      for (const h of r % 2 === 0 ? halves : halves.reverse()) {
        // The other half's pool beside this half's pgbench could pass max_connections.
        await h.other.releaseServiceConnections();
        const label = `S4 ${h.label} ${clients} clients`;
        append(h.into, await measureCycles(h.bench, clients, label, notes, { service: h.svc, round: r }));
      }
    }
    notes.push(
      ...errorNotes('S4 large, service', big.service),
      ...errorNotes('S4 empty, service', base.service),
    );
    return report(b, clients, notes, loaded, base, big);
  } finally {
    for (const svc of services) await b.stopService(svc);
    b.live.delete(dropEmpty);
    await emptyDb.drop().catch((err) => b.log(`could not drop ${emptyDb.name}: ${(err as Error).message}`));
  }
}

function append(into: Sides, from: Sides): void {
  for (const [side, runs] of Object.entries(from) as [keyof Sides, unknown][]) {
    if (!Array.isArray(runs)) continue;
    into[side] = [...(into[side] ?? []), ...runs];
  }
}

interface Loaded {
  rowsBefore: number | undefined;
  loadSeconds: number;
  size: { ops: number; events: number; bytes: string } | undefined;
}

async function loadLarge(b: Bench): Promise<Loaded> {
  const before = await b.db.query<{ n: number }>('SELECT count(*)::int AS n FROM idem_operations');
  const t = Date.now();
  b.log(`S4: inserting ${b.cfg.largeRows.toLocaleString('en')} operations (+2 events each)`);
  await b.db.insertLargeLedger(b.scope, b.cfg.largeRows, FINGERPRINT, REQUEST_TEXT, RESULT_TEXT, (m) =>
    b.log(m),
  );
  const loadSeconds = (Date.now() - t) / 1000;
  const size = await b.db.query<{ ops: number; events: number; bytes: string }>(
    `SELECT (SELECT count(*)::int FROM idem_operations) AS ops, (SELECT count(*)::int FROM idem_events) AS events,
       pg_size_pretty(pg_database_size(current_database())) AS bytes`,
  );
  b.log(`S4: ledger now ${JSON.stringify(size[0])} (loaded in ${loadSeconds.toFixed(0)} s)`);
  return { rowsBefore: before[0]?.n, loadSeconds, size: size[0] };
}

function report(
  b: Bench,
  clients: number,
  notes: string[],
  loaded: Loaded,
  base: Sides,
  large: Sides,
): ScenarioResult {
  const scenario = `S1 at ${clients} clients, ${b.cfg.largeRows.toLocaleString('en')} rows vs empty`;
  // The two halves run in the same rounds: each round's large / empty is one
  // ratio, and the figure is their median [min–max], like every paired figure.
  const rate = (m: MeasuredLoad) => m.perSecond;
  const p99 = (m: MeasuredLoad) => m.latency.p99;
  const flat = (f: (m: MeasuredLoad) => number, figure: string): Row => ({
    id: 'S4',
    scenario,
    figure: `${figure}, large / empty (reference: the floor's)`,
    unit: 'x',
    service: perRun(large.service, base.service, f),
    reference: perRun(large.floor ?? [], base.floor, f),
    sameSql: perRun(large.sameSql ?? [], base.sameSql, f),
  });
  /** The service's large / empty over the floor's, round by round. */
  const relative = (f: (m: MeasuredLoad) => number): Spread | undefined => {
    const svc = perRun(large.service, base.service, f)?.runs;
    const ref = perRun(large.floor ?? [], base.floor, f)?.runs;
    return svc && ref ? spread(svc.map((x, i) => x / (ref[i] ?? Number.NaN))) : undefined;
  };
  const [largeRate, , largeP99] = figureRows('S4', `${scenario}: large ledger`, 'cycles/s', large);
  const rows: Row[] = [
    largeRate!,
    largeP99!,
    ...sideCpuRows('S4', `${scenario}: large ledger`, 'cycle', large).slice(1, 2),
    flat(rate, 'cycles/s'),
    flat(p99, 'p99'),
    {
      id: 'S4',
      scenario,
      figure: 'cycles/s, large / empty, service relative to the floor (drift cancelled)',
      unit: 'x',
      service: relative(rate),
    },
  ];
  return {
    id: 'S4',
    rows,
    detail: {
      rowsBefore: loaded.rowsBefore,
      largeRows: b.cfg.largeRows,
      loadSeconds: loaded.loadSeconds,
      size: loaded.size,
      empty: base,
      large,
    },
    notes,
  };
}
