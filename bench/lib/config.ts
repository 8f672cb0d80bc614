/**
 * The benchmark's settings, from the environment. Defaults keep the whole
 * `npm run bench` to a few minutes on a 2-core machine; every figure is the
 * median of `runs` runs.
 */

export type PgbenchMode = 'extended' | 'prepared';

export interface BenchConfig {
  /** The server to benchmark; only its host, port and credentials are used (a fresh database is made). */
  databaseUrl: string;
  /** Measured seconds per run of a throughput scenario. */
  seconds: number;
  /** Seconds of load before measuring (connections, JIT, caches); discarded. */
  warmupSeconds: number;
  /** Load right after a service process starts (JIT, lazy compilation, pool), before its first run. */
  primeSeconds: number;
  /** S5 stops waiting for the sweeper after this long and reports the rate and a projection. */
  drainCapSeconds: number;
  /** Runs per figure; medians are quoted, min-max shown. */
  runs: number;
  /** Concurrent clients of S1 and S2 (and pgbench's connections). */
  clients: number[];
  /** S4: operations (plus two events each) put in the ledger before the large run. */
  largeRows: number;
  /** S4 and S5 run S1 at this many clients. */
  scenarioClients: number;
  /** S5: expired leases for the sweeper to drain. */
  expiredLeases: number;
  /** S3: rounds per run, and concurrent begins per round. */
  raceRounds: number;
  raceClients: number;
  /** S2: completed keys the replays pick from. */
  replayKeys: number;
  /**
   * pgbench's protocol for the same-SQL diagnostic. `prepared` is what the service
   * does by default (named prepared statements, `IDEM_DB_PREPARED`); `extended`
   * shows the unnamed path. The floor always runs `-M prepared`.
   */
  pgbenchMode: PgbenchMode;
  /** S8: arrivals per second; 0 means half of S1's measured maximum at 16 clients. */
  openRate: number;
  /** S8: most HTTP connections the open-loop driver may open. */
  openConnections: number;
  /** S9: clients of the embedded engine's S1 and S2. */
  embeddedClients: number;
  /** Scenario ids to run (`BENCH_ONLY=S1,S3`); all when absent. */
  only: Set<string> | undefined;
  /** Keep the bench database after the run, for a post-mortem. */
  keepDatabase: boolean;
  /** Where the results go (`bench/results`, whose `latest.md` is committed); elsewhere for trial runs. */
  resultsDir: string | undefined;
}

type Env = Record<string, string | undefined>;

function num(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw.trim() === '') return def;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < min || n > max) {
    throw new Error(`${name} must be a number between ${min} and ${max}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const n = num(env, name, def, min, max);
  if (!Number.isInteger(n)) throw new Error(`${name} must be an integer, got ${n}`);
  return n;
}

export function loadBenchConfig(env: Env = process.env): BenchConfig {
  const clients = (env.BENCH_CLIENTS ?? '16,64')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1 || n > 512) throw new Error(`BENCH_CLIENTS: bad count ${s}`);
      return n;
    });
  if (clients.length === 0) throw new Error('BENCH_CLIENTS is empty');
  const mode = env.BENCH_PGBENCH_MODE ?? 'prepared';
  if (mode !== 'extended' && mode !== 'prepared') {
    throw new Error('BENCH_PGBENCH_MODE must be extended or prepared (simple cannot bind parameters)');
  }
  const only = env.BENCH_ONLY
    ? new Set(env.BENCH_ONLY.split(',').map((s) => s.trim().toUpperCase()))
    : undefined;
  return {
    databaseUrl: env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/test',
    seconds: num(env, 'BENCH_SECONDS', 5, 1, 600),
    warmupSeconds: num(env, 'BENCH_WARMUP_SECONDS', 1, 0, 60),
    primeSeconds: num(env, 'BENCH_PRIME_SECONDS', 2, 0, 60),
    drainCapSeconds: num(env, 'BENCH_DRAIN_CAP_SECONDS', 60, 5, 3600),
    runs: int(env, 'BENCH_RUNS', 3, 1, 50),
    clients,
    largeRows: int(env, 'BENCH_LARGE_ROWS', 1_000_000, 0, 100_000_000),
    scenarioClients: int(env, 'BENCH_SCENARIO_CLIENTS', 16, 1, 512),
    expiredLeases: int(env, 'BENCH_EXPIRED_LEASES', 100_000, 1, 10_000_000),
    raceRounds: int(env, 'BENCH_RACE_ROUNDS', 50, 1, 10_000),
    raceClients: int(env, 'BENCH_RACE_CLIENTS', 64, 2, 512),
    replayKeys: int(env, 'BENCH_REPLAY_KEYS', 1000, 1, 1_000_000),
    pgbenchMode: mode,
    openRate: num(env, 'BENCH_OPEN_RATE', 0, 0, 1_000_000),
    openConnections: int(env, 'BENCH_OPEN_CONNECTIONS', 256, 1, 4096),
    embeddedClients: int(env, 'BENCH_EMBEDDED_CLIENTS', 4, 1, 64),
    only,
    keepDatabase: /^(1|true|yes)$/i.test(env.BENCH_KEEP_DB ?? ''),
    resultsDir: env.BENCH_RESULTS_DIR || undefined,
  };
}

export function wants(cfg: BenchConfig, id: string): boolean {
  return !cfg.only || cfg.only.has(id);
}
