/**
 * S4: S1 with a large ledger against S1 on the (nearly empty) ledger the
 * earlier scenarios left, measured right before, by the same service
 * process. Then `largeRows` operations and twice as many events are put in
 * the ledger, and S1 runs again, with its floor and same-SQL references, so
 * a slowdown can be told apart: Postgres' own (the floor slows down too) or
 * the service's (only it does).
 */

import {
  type Bench,
  errorNotes,
  figureRows,
  type Row,
  type ScenarioResult,
  type Sides,
  sideCpuRows,
} from '../lib/bench.js';
import { beginCompleteCycle } from '../lib/http-load.js';
import type { Service } from '../lib/service.js';
import { FINGERPRINT, REQUEST_TEXT, RESULT_TEXT } from '../lib/statements.js';
import { type Spread, spread } from '../lib/stats.js';
import { measureCycles, prime } from './s1-cycle.js';

export async function runS4(b: Bench): Promise<ScenarioResult> {
  const clients = b.cfg.scenarioClients;
  const notes: string[] = [];
  // One service process for both halves, so only the ledger's size differs.
  const svc = await b.startService(clients + 1);
  try {
    return await measure(b, svc, clients, notes);
  } finally {
    await b.stopService(svc);
  }
}

async function measure(b: Bench, svc: Service, clients: number, notes: string[]): Promise<ScenarioResult> {
  await prime(b, svc, clients, beginCompleteCycle(b.scope, 'prime4'));
  const base = await measureCycles(b, clients, `S4 empty ${clients} clients`, notes, { service: svc });

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
  await b.db.checkpoint();

  const large = await measureCycles(b, clients, `S4 large ${clients} clients`, notes, { service: svc });
  notes.push(...errorNotes('S4 large, service', large.service));

  const scenario = `S1 at ${clients} clients, ${b.cfg.largeRows.toLocaleString('en')} rows vs empty`;
  // The empty and large runs are minutes apart, not paired: the ratio of the
  // medians is quoted, and the range is the widest one the runs allow.
  const ratio = (l: number[], e: number[]): Spread => {
    const [sl, se] = [spread(l), spread(e)];
    return { median: sl.median / se.median, min: sl.min / se.max, max: sl.max / se.min, runs: [] };
  };
  type Side = 'service' | 'floor' | 'sameSql';
  const relative = (f: (p: Sides, side: Side) => number[]): Spread => {
    const svc = ratio(f(large, 'service'), f(base, 'service'));
    const ref = ratio(f(large, 'floor'), f(base, 'floor'));
    return { median: svc.median / ref.median, min: svc.min / ref.max, max: svc.max / ref.min, runs: [] };
  };
  const rate = (p: Sides, side: Side) => (p[side] ?? []).map((m) => m.perSecond);
  const p99 = (p: Sides, side: Side) => (p[side] ?? []).map((m) => m.latency.p99);
  const flat = (f: typeof rate, figure: string): Row => ({
    id: 'S4',
    scenario,
    figure: `${figure}, large / empty (reference: the floor's)`,
    unit: 'x',
    service: ratio(f(large, 'service'), f(base, 'service')),
    reference: ratio(f(large, 'floor'), f(base, 'floor')),
    sameSql: ratio(f(large, 'sameSql'), f(base, 'sameSql')),
  });
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
      rowsBefore: before[0]?.n,
      largeRows: b.cfg.largeRows,
      loadSeconds,
      size: size[0],
      empty: base,
      large,
    },
    notes,
  };
}
