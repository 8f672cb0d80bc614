/**
 * Prometheus metrics, one registry per app (tests build several apps in one
 * process). Below both `http/` and `ledger/`: the routes and the sweeper each
 * count into it, and the per-scope source comes from the ledger as a function,
 * so this module imports neither. Gauges that need the database are collected
 * at scrape time; when it is down, a scrape still answers from what the
 * process counted, with `idem_database_up 0`, because that is exactly when an
 * operator looks.
 */
import { sql } from 'drizzle-orm';
import { Counter, Gauge, Registry } from 'prom-client';
import { coalescingStats } from '../db/coalesce.js';
import type { Database } from '../db/database.js';
import { isUnavailable } from '../db/errors.js';
import { SeriesHistogram } from './series-histogram.js';

/** The counters and histogram the routes and the sweeper update. */
export interface Metrics {
  registry: Registry;
  beginOutcomes: Counter<'outcome'>;
  /** Observed through series kept per route, method and status (`series-histogram.ts`). */
  httpDuration: SeriesHistogram<'method' | 'route' | 'status'>;
  transitions: Counter<'call'>;
  sweeperRuns: Counter<'result'>;
  sweeperRows: Counter<'kind'>;
}

/** One row of the per-scope gauges. */
export interface ScopeGauge {
  scope: string;
  unknown: number;
  oldestAgeS: number;
}

/** What one scrape learnt from the database. */
interface Probe {
  up: boolean;
  rows: ScopeGauge[];
}

/** Asks the database once per scrape; a failure is an answer (down, no per-scope rows), never a failed scrape. */
function prober(db: Database, scopeGauges?: () => Promise<ScopeGauge[]>): () => Promise<Probe> {
  const ping = async () => {
    await db.rows(sql`SELECT 1`);
  };
  const once = async (): Promise<Probe> => {
    try {
      if (!scopeGauges) {
        await ping();
        return { up: true, rows: [] };
      }
      return { up: true, rows: await scopeGauges() };
    } catch (err) {
      if (isUnavailable(err) || !scopeGauges) return { up: false, rows: [] };
      // The gauge query failed for another reason (an unmigrated database): is the database there?
      return ping().then(
        () => ({ up: true, rows: [] }),
        () => ({ up: false, rows: [] }),
      );
    }
  };
  // prom-client collects every metric concurrently, so the gauges share one probe per scrape.
  let scrape: Promise<Probe> | undefined;
  return () => {
    scrape ??= once().finally(() => setImmediate(() => (scrape = undefined)));
    return scrape;
  };
}

/**
 * The registry and the counters the service updates. `scopeGauges` feeds the
 * `idem_outcome_unknown_*` gauges (the server passes the ledger's source).
 */
export function createMetrics(db: Database, scopeGauges?: () => Promise<ScopeGauge[]>): Metrics {
  const registry = new Registry();
  const beginOutcomes = new Counter({
    name: 'idem_begin_total',
    help: 'begin calls by outcome or error code',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const httpDuration = new SeriesHistogram({
    name: 'idem_http_request_duration_seconds',
    help: 'HTTP request latency',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const transitions = new Counter({
    name: 'idem_transitions_total',
    help: 'successful lease-holder and operator calls, by call',
    labelNames: ['call'] as const,
    registers: [registry],
  });
  const sweeperRuns = new Counter({
    name: 'idem_sweeper_runs_total',
    help: 'sweeper passes by result',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const sweeperRows = new Counter({
    name: 'idem_sweeper_rows_total',
    help: 'rows the sweeper changed, by kind (lease_expired, approval_expired, purged)',
    labelNames: ['kind'] as const,
    registers: [registry],
  });
  new Gauge({
    name: 'idem_db_pool_connections',
    help: 'database pool connections by state',
    labelNames: ['state'] as const,
    registers: [registry],
    collect() {
      const s = db.poolStats();
      this.set({ state: 'total' }, s.total);
      this.set({ state: 'idle' }, s.idle);
      this.set({ state: 'in_use' }, s.total - s.idle);
      this.set({ state: 'waiting' }, s.waiting);
    },
  });
  new Counter({
    name: 'idem_db_coalesced_calls_total',
    help: 'hot-path calls by statement and how they were sent: alone, or folded with others into one statement (IDEM_DB_COALESCE)',
    labelNames: ['statement', 'sent'] as const,
    registers: [registry],
    collect() {
      this.reset();
      for (const [statement, st] of Object.entries(coalescingStats(db))) {
        this.inc({ statement, sent: 'alone' }, st.inputs - st.folded);
        this.inc({ statement, sent: 'folded' }, st.folded);
      }
    },
  });
  const load = prober(db, scopeGauges);
  new Gauge({
    name: 'idem_database_up',
    help: '1 when the database answered this scrape, 0 when it is unreachable',
    registers: [registry],
    async collect() {
      this.set((await load()).up ? 1 : 0);
    },
  });
  if (scopeGauges) {
    new Gauge({
      name: 'idem_outcome_unknown_operations',
      help: 'operations in outcome_unknown, per scope (absent while the database is down)',
      labelNames: ['scope'] as const,
      registers: [registry],
      async collect() {
        const { rows } = await load();
        this.reset();
        for (const r of rows) this.set({ scope: r.scope }, r.unknown);
      },
    });
    new Gauge({
      name: 'idem_outcome_unknown_oldest_age_seconds',
      help: 'age of the oldest outcome_unknown operation, per scope (absent while the database is down)',
      labelNames: ['scope'] as const,
      registers: [registry],
      async collect() {
        const { rows } = await load();
        this.reset();
        for (const r of rows) this.set({ scope: r.scope }, r.oldestAgeS);
      },
    });
  }
  return { registry, beginOutcomes, httpDuration, transitions, sweeperRuns, sweeperRows };
}
