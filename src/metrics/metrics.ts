/**
 * Prometheus metrics, one registry per app (tests build several apps in one
 * process). Gauges that need the database are collected at scrape time.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Database } from '../db/database.js';

export interface Metrics {
  registry: Registry;
  beginOutcomes: Counter<'outcome'>;
  httpDuration: Histogram<'method' | 'route' | 'status'>;
  transitions: Counter<'call'>;
  sweeperRuns: Counter<'result'>;
  sweeperRows: Counter<'kind'>;
}

export function createMetrics(
  db: Database,
  scopeGauges?: () => Promise<{ scope: string; unknown: number; oldestAgeS: number }[]>,
): Metrics {
  const registry = new Registry();
  const beginOutcomes = new Counter({
    name: 'idem_begin_total',
    help: 'begin calls by outcome or error code',
    labelNames: ['outcome'] as const,
    registers: [registry],
  });
  const httpDuration = new Histogram({
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
  if (scopeGauges) {
    // prom-client collects every metric concurrently, so each gauge fills itself
    // from one query shared by the scrape.
    let scrape: ReturnType<typeof scopeGauges> | undefined;
    const load = () => {
      scrape ??= scopeGauges().finally(() => setImmediate(() => (scrape = undefined)));
      return scrape;
    };
    new Gauge({
      name: 'idem_outcome_unknown_operations',
      help: 'operations in outcome_unknown, per scope',
      labelNames: ['scope'] as const,
      registers: [registry],
      async collect() {
        const rows = await load();
        this.reset();
        for (const r of rows) this.set({ scope: r.scope }, r.unknown);
      },
    });
    new Gauge({
      name: 'idem_outcome_unknown_oldest_age_seconds',
      help: 'age of the oldest outcome_unknown operation, per scope',
      labelNames: ['scope'] as const,
      registers: [registry],
      async collect() {
        const rows = await load();
        this.reset();
        for (const r of rows) this.set({ scope: r.scope }, r.oldestAgeS);
      },
    });
  }
  return { registry, beginOutcomes, httpDuration, transitions, sweeperRuns, sweeperRows };
}
