/**
 * `npm run bench`: builds the service, makes a fresh database, runs the
 * scenarios of benchmarks.md (S1..S9, and S10 when its file exists) against
 * the service as its own process, next to the floor, the HTTP floor and the
 * same-SQL diagnostic, and writes bench/results/.
 * Settings: bench/lib/config.ts and bench/README.md.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { cpus, loadavg, tmpdir, totalmem } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench, type ScenarioResult } from './lib/bench.js';
import { loadBenchConfig, wants } from './lib/config.js';
import { BenchDatabase, vacuumsForServer } from './lib/database.js';
import { checkParity, type Parity } from './lib/parity.js';
import { pgbenchVersion } from './lib/pgbench.js';
import { type Meta, writeResults } from './lib/report.js';
import { buildService, ROOT } from './lib/service.js';
import { writeIndex } from './results-index.js';
import { runS1 } from './scenarios/s1-cycle.js';
import { runS2 } from './scenarios/s2-replay.js';
import { runS3 } from './scenarios/s3-race.js';
import { runS4 } from './scenarios/s4-large.js';
import { runS5 } from './scenarios/s5-sweeper.js';
import { runS6 } from './scenarios/s6-executor.js';
import { runS8 } from './scenarios/s8-open-loop.js';
import { runS9 } from './scenarios/s9-embedded.js';

type Runner = (b: Bench) => Promise<ScenarioResult | ScenarioResult[]>;

/** Scenarios added later by their own file (`scenarios/s10-*.ts` exporting `runS10`), if present. */
async function extraScenario(id: string): Promise<Runner | undefined> {
  const dir = join(ROOT, 'bench/scenarios');
  const file = (await readdir(dir)).find((f) => f.startsWith(`${id.toLowerCase()}-`) && f.endsWith('.ts'));
  if (!file) return undefined;
  const mod = (await import(pathToFileURL(join(dir, file)).href)) as Record<string, unknown>;
  const run = mod[`run${id}`];
  return typeof run === 'function' ? (run as Runner) : undefined;
}

function commit(): string {
  try {
    const git = (args: string[]) =>
      execFileSync('git', ['--no-optional-locks', ...args], { cwd: ROOT, encoding: 'utf8' }).trim();
    const head = git(['rev-parse', '--short', 'HEAD']);
    return git(['status', '--porcelain', '--untracked-files=no']) ? `${head}+dirty` : head;
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<number> {
  const cfg = loadBenchConfig();
  const started = new Date();
  const stamp = started.toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  const loadAvgStart = loadavg();
  const workDir = await mkdtemp(join(tmpdir(), 'idem-bench-'));
  const log = (m: string) => process.stderr.write(`[bench] ${m}\n`);
  log(
    `runs ${cfg.runs} x ${cfg.seconds} s (+${cfg.warmupSeconds} s warm-up), clients ${cfg.clients.join(',')}, ` +
      `floor pgbench -M prepared, same SQL -M ${cfg.pgbenchMode}, large ledger ${cfg.largeRows.toLocaleString('en')} rows; scratch ${workDir}`,
  );
  const build = await buildService();
  log(build.note ?? `service: node ${build.args.join(' ')}`);
  const db = await BenchDatabase.create(cfg.databaseUrl, stamp);
  log(`database ${db.name} created and migrated`);
  const b = new Bench(cfg, db, build, workDir);

  let interrupted = false;
  const cleanup = async () => {
    await Promise.all([...b.live].map((s) => s.stop().catch(() => {})));
    if (cfg.keepDatabase) log(`kept database ${db.name} (BENCH_KEEP_DB)`);
    else await db.drop().catch((err) => log(`could not drop ${db.name}: ${(err as Error).message}`));
  };
  const onSignal = () => {
    if (interrupted) return;
    interrupted = true;
    log('interrupted: stopping the service and dropping the database');
    void cleanup().finally(() => process.exit(130));
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);

  const results: ScenarioResult[] = [];
  let parity: Parity | undefined;
  const info = await db.serverInfo();
  try {
    const conns = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity');
    const max = Number.parseInt(info.settings.max_connections ?? '100', 10);
    const need = Math.max(...cfg.clients, cfg.raceClients) + 8;
    if ((conns[0]?.n ?? 0) + need > max) {
      log(`WARNING: max_connections ${max}, ${conns[0]?.n} in use, up to ${need} needed: runs may fail`);
    }
    parity = await checkParity(b);
    log(
      parity.ok
        ? `parity: service and same-SQL pgbench write the same rows; ${parity.sizes}`
        : `PARITY FAILED: ${parity.differences}`,
    );

    // Without autovacuum on the server, every scenario would run on all the dead
    // versions the earlier ones left (S5 in a full run: hundreds of thousands).
    const standInVacuum = vacuumsForServer(info.settings);
    b.standInVacuum = standInVacuum;
    if (standInVacuum) {
      log(
        "the server's autovacuum is off: VACUUM (ANALYZE) of the bench database before each scenario, ANALYZE after each priming",
      );
    }
    const step = async (id: string, fn: () => Promise<ScenarioResult | ScenarioResult[]>) => {
      if (!wants(cfg, id) || interrupted) return;
      if (standInVacuum) {
        const v = Date.now();
        await db.vacuumAnalyze();
        log(`${id}: VACUUM (ANALYZE) in ${Date.now() - v} ms`);
      }
      const t = Date.now();
      const load = loadavg()[0]!;
      log(`${id} ... (load average ${load.toFixed(1)})`);
      try {
        const r = await fn();
        for (const x of Array.isArray(r) ? r : [r]) {
          x.loadAvg = [load, loadavg()[0]!];
          results.push(x);
        }
      } catch (err) {
        log(`${id} failed: ${(err as Error).stack}`);
        results.push({
          id,
          rows: [],
          detail: { error: (err as Error).message },
          notes: [`${id} failed: ${(err as Error).message}`],
        });
      }
      log(`${id} done in ${((Date.now() - t) / 1000).toFixed(0)} s`);
    };

    await step(wants(cfg, 'S1') ? 'S1' : 'S7', async () => {
      const r = await runS1(b);
      return [r.s1, r.s7];
    });
    // S8 right after S1: its arrival rate is half of S1's measured maximum.
    await step('S8', () => runS8(b));
    await step('S2', () => runS2(b));
    await step('S3', () => runS3(b));
    await step('S6', () => runS6(b));
    await step('S9', () => runS9(b));
    const s10 = await extraScenario('S10');
    if (s10) await step('S10', () => s10(b));
    // S5 before S4: the sweeper is measured on the ledger S1..S3 left, not on the large one.
    await step('S5', () => runS5(b));
    await step('S4', () => runS4(b));
  } finally {
    if (!interrupted) await cleanup();
    await rm(workDir, { recursive: true, force: true }).catch(() => {});
  }
  if (interrupted) return 130;

  const finished = new Date();
  const meta: Meta = {
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    durationSeconds: (finished.getTime() - started.getTime()) / 1000,
    commit: commit(),
    machine: {
      cpus: cpus().length,
      cpuModel: cpus()[0]?.model.trim() ?? 'unknown',
      memGiB: Math.round(totalmem() / 2 ** 30),
      loadAvgStart,
      loadAvgEnd: loadavg(),
    },
    node: process.version,
    postgres: info.version,
    postgresSettings: info.settings,
    pgbench: await pgbenchVersion(),
    pgbenchMode: cfg.pgbenchMode,
    service:
      build.kind === 'dist' ? 'node dist/server.js (npm run build)' : `tsx src/server.ts (${build.note})`,
    runs: cfg.runs,
    seconds: cfg.seconds,
    warmupSeconds: cfg.warmupSeconds,
    parity: parity && {
      ok: parity.ok,
      differences: parity.differences,
      scriptNotes: parity.scriptNotes,
      sizes: parity.sizes,
    },
  };
  const { md, files } = await writeResults(
    cfg.resultsDir ?? join(ROOT, 'bench/results'),
    stamp,
    meta,
    results,
  );
  process.stdout.write(md);
  log(`wrote ${files.join(', ')}`);
  // The index of kept runs lives beside them; a trial run elsewhere leaves it alone.
  if (cfg.resultsDir === undefined) log(`wrote ${writeIndex()}`);
  return results.some((r) => r.rows.length === 0) ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`[bench] ${(err as Error).stack}\n`);
    process.exit(1);
  },
);
