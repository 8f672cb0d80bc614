/**
 * pgbench runs: the floor (hand-written SQL, `floor.ts`) and the same-SQL
 * diagnostic (the service's statements, `statements.ts`), with the same
 * number of connections as the service's clients.
 *
 * A service statement is first made safe for pgbench's parser
 * (`sql-text.ts`); its `$n` parameters become pgbench variables bound as
 * parameters (`-D pN=value`, so pgbench sends what node-postgres sends), NULL
 * stays a literal, and the sentinels of the per-transaction values become
 * expressions over `\set` counters. Latencies come from pgbench's
 * per-transaction log (`-l`), windowed like the HTTP driver's samples; with a
 * fixed rate (`-R`) pgbench measures each latency from the transaction's
 * scheduled start, as the open-loop HTTP driver does.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { PgbenchMode } from './config.js';
import type { CpuWindow } from './cpu.js';
import type { MeasuredLoad } from './http-load.js';
import { pgbenchSafe } from './sql-text.js';
import type { RenderedQuery } from './statements.js';
import { summarize } from './stats.js';

export interface PgbenchScript {
  text: string;
  /** Variables given with `-D`: the constant parameters, and initial counters. */
  defines: Record<string, string>;
  /** Text rewrites that keep pgbench from misreading the SQL (`sql-text.ts`). */
  notes: string[];
}

/** Builds a pgbench script from rendered statements; see the module comment. */
export class ScriptBuilder {
  readonly #lines: string[] = [];
  readonly #defines = new Map<string, string>();
  readonly #byValue = new Map<string, string>();
  readonly #known = new Set(['client_id', 'random_seed', 'scale']);
  readonly #prefixes: string[] = [];
  readonly #notes: string[] = [];

  /** Defines a variable for every client (`-D`); counters persist across a client's transactions. */
  define(name: string, value: string): this {
    this.#defines.set(name, value);
    this.#known.add(name);
    return this;
  }

  /** A meta-command such as `\set n :n + 1`. */
  meta(line: string): this {
    const m = /^\\set\s+(\w+)/.exec(line);
    if (m) this.#known.add(m[1]!);
    this.#lines.push(line);
    return this;
  }

  /**
   * One statement. `vary` maps a sentinel parameter value to the SQL
   * expression that replaces it; `gset` names the prefix of the variables
   * that capture the statement's one row.
   */
  query(q: RenderedQuery, vary: Map<unknown, string>, gset?: string): this {
    const safe = pgbenchSafe(q.sql);
    this.#notes.push(...safe.notes);
    const text = safe.text.trim().replace(/\$(\d+)\b/g, (_m, n: string) => {
      const value = q.params[Number(n) - 1];
      const expr = vary.get(value);
      if (expr !== undefined) return `(${expr})`;
      if (value === null || value === undefined) return 'NULL';
      return `:${this.#constant(value)}`;
    });
    if (gset) {
      this.#prefixes.push(gset);
      this.#lines.push(`${text} \\gset ${gset}`);
    } else {
      this.#lines.push(`${text};`);
    }
    return this;
  }

  #constant(value: unknown): string {
    if (typeof value !== 'string' && typeof value !== 'number' && typeof value !== 'boolean') {
      throw new Error(`cannot bind a ${typeof value} parameter in pgbench`);
    }
    const id = `${typeof value}:${String(value)}`;
    let name = this.#byValue.get(id);
    if (!name) {
      name = `p${this.#byValue.size}`;
      this.#byValue.set(id, name);
      this.define(name, String(value));
    }
    return name;
  }

  /** A hand-written statement over `:variables` (the floor); no trailing `;`. */
  sql(text: string, gset?: string): this {
    const safe = pgbenchSafe(text);
    this.#notes.push(...safe.notes);
    const line = safe.text.trim();
    if (gset) this.#prefixes.push(gset);
    this.#lines.push(gset ? `${line} \\gset ${gset}` : `${line};`);
    return this;
  }

  build(): PgbenchScript {
    const text = `${this.#lines.join('\n')}\n`;
    // Any `:name` pgbench would take for a variable must be one: an undefined
    // one aborts the client (extended mode) in the middle of the run.
    for (const m of text.matchAll(/(?<!:):([A-Za-z0-9_]+)/g)) {
      const name = m[1]!;
      if (!this.#known.has(name) && !this.#prefixes.some((p) => name.startsWith(p))) {
        throw new Error(`the pgbench script refers to an undefined variable :${name}`);
      }
    }
    return { text, defines: Object.fromEntries(this.#defines), notes: [...new Set(this.#notes)] };
  }
}

export interface PgbenchOptions {
  url: string;
  script: PgbenchScript;
  clients: number;
  mode: PgbenchMode;
  workDir: string;
  /** Timed run: warm-up then the measured window. */
  warmupSeconds?: number;
  seconds?: number;
  /** Or a fixed number of transactions per client (no log, no window). */
  transactions?: number;
  /** A fixed arrival rate (`-R`, transactions per second over all clients): an open loop. */
  rate?: number;
  /** Snapshots CPU use when the window opens and closes; gets pgbench's pid. */
  cpu?: (pgbenchPid: () => number | undefined) => CpuWindow;
}

export interface PgbenchResult extends MeasuredLoad {
  /** Transactions pgbench reports as processed in the whole run, warm-up included. */
  processed: number;
}

/** Runs pgbench; throws with its output when a client aborted. */
export async function runPgbench(o: PgbenchOptions): Promise<PgbenchResult> {
  const dir = await mkdtemp(join(o.workDir, 'pgbench-'));
  const file = join(dir, 'script.sql');
  await writeFile(file, o.script.text);
  const warmup = o.warmupSeconds ?? 0;
  const seconds = o.seconds ?? 0;
  const args = ['-n', '-M', o.mode, '-c', String(o.clients), '-j', '1', '-f', file];
  if (o.rate !== undefined) args.push('-R', String(o.rate));
  if (o.transactions !== undefined) args.push('-t', String(o.transactions));
  else args.push('-T', String(Math.ceil(warmup + seconds) + 1), '-l', '--log-prefix', join(dir, 'tx'));
  for (const [k, v] of Object.entries(o.script.defines)) args.push('-D', `${k}=${v}`);
  args.push(o.url);

  const startedMs = Date.now();
  let pid: number | undefined;
  const cpu = o.transactions === undefined ? o.cpu?.(() => pid) : undefined;
  const opening = setTimeout(() => cpu?.open(), warmup * 1000);
  const closing = setTimeout(() => cpu?.close(), (warmup + seconds) * 1000);
  const { code, stdout, stderr } = await run('pgbench', args, (p) => {
    pid = p;
  }).finally(() => {
    clearTimeout(opening);
    clearTimeout(closing);
  });
  const processed = Number(/actually processed: (\d+)/.exec(stdout)?.[1] ?? Number.NaN);
  if (code !== 0) {
    throw new Error(`pgbench exited with ${code}:\n${tail(stderr || stdout, 15)}`);
  }
  if (o.transactions !== undefined) {
    return {
      completed: processed,
      seconds: Number.NaN,
      perSecond: Number.NaN,
      latency: summarize([]),
      errors: 0,
      errorSamples: [],
      processed,
    };
  }

  const from = startedMs + warmup * 1000;
  const to = from + seconds * 1000;
  const latencies: number[] = [];
  let errors = 0;
  for (const name of await readdir(dir)) {
    if (!name.startsWith('tx.')) continue;
    for (const line of (await readFile(join(dir, name), 'utf8')).split('\n')) {
      // client_id transaction_no time script_no time_epoch time_us [...]
      const f = line.split(' ');
      if (f.length < 6) continue;
      const us = Number(f[2]);
      if (!Number.isFinite(us)) {
        errors++;
        continue;
      }
      const endMs = Number(f[4]) * 1000 + Number(f[5]) / 1000;
      if (endMs >= from && endMs < to) latencies.push(us / 1000);
    }
  }
  return {
    completed: latencies.length,
    seconds,
    perSecond: latencies.length / seconds,
    latency: summarize(latencies),
    errors,
    errorSamples: [],
    processed,
    cpu: await cpu?.result(latencies.length),
  };
}

function tail(s: string, lines: number): string {
  return s.trim().split('\n').slice(-lines).join('\n');
}

function run(
  cmd: string,
  args: string[],
  onSpawn?: (pid: number | undefined) => void,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    onSpawn?.(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => {
      stdout += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      stderr += d.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** pgbench's version line, for the results' metadata. */
export async function pgbenchVersion(): Promise<string> {
  const r = await run('pgbench', ['--version']);
  return r.stdout.trim();
}
