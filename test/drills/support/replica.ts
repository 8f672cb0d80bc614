/**
 * A service replica as a real child process (`node --import tsx src/server.ts`),
 * listening on 127.0.0.1, so a drill can kill -9 it, stop it, skew its clock
 * or put a proxy in front of it. Node itself is spawned (not npx), so the
 * signals reach the server and not a wrapper.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** A port that was free a moment ago on 127.0.0.1. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const addr = s.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      s.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface ReplicaOptions {
  name: string;
  databaseUrl: string;
  /** Fixed port; a restart reuses it, as a load balancer's target would. */
  port?: number;
  /** Extra environment (e.g. `NODE_OPTIONS` for a clock preload). */
  env?: Record<string, string>;
  migrateOnStart?: boolean;
}

/** Every replica started in this process, so `stopAll` leaves none behind. */
const live = new Set<Replica>();

// Last line of defence if a test file dies before its afterAll: no orphan servers.
process.once('exit', () => {
  for (const r of live) r.proc?.kill('SIGKILL');
});

export class Replica {
  proc: ChildProcess | undefined;
  port = 0;
  /** Times this replica was started. */
  starts = 0;
  /** `/readyz` answered 200 since the last start, and it was not killed or stopped since. */
  ready = false;
  /** The last 200 lines it printed, with when they arrived (real clock). */
  readonly lines: { at: number; line: string }[] = [];
  #exited: Promise<void> | undefined;

  constructor(readonly opts: ReplicaOptions) {
    if (opts.port) this.port = opts.port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.proc?.pid;
  }

  get running(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** Starts the process and resolves when `/readyz` answers 200. */
  async start(timeoutMs = 90_000): Promise<void> {
    if (this.running) throw new Error(`${this.opts.name} is already running`);
    if (!this.port) this.port = await freePort();
    const env: Record<string, string | undefined> = { ...process.env };
    delete env.NODE_OPTIONS; // only what the drill sets
    Object.assign(env, {
      DATABASE_URL: this.opts.databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(this.port),
      IDEM_MIGRATE_ON_START: this.opts.migrateOnStart ? 'true' : 'false',
      LOG_LEVEL: 'warn',
      ...this.opts.env,
    });
    const proc = spawn(process.execPath, ['--import', 'tsx', 'src/server.ts'], {
      cwd: ROOT,
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: false,
    });
    this.proc = proc;
    this.starts++;
    live.add(this);
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        this.lines.push({ at: Date.now(), line });
        if (this.lines.length > 200) this.lines.shift();
      }
    };
    proc.stdout!.on('data', keep);
    proc.stderr!.on('data', keep);
    this.#exited = new Promise((resolve) => proc.once('exit', () => resolve()));
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null || proc.signalCode !== null) {
        throw new Error(`${this.opts.name} exited while starting:\n${this.tail()}`);
      }
      try {
        const r = await fetch(`${this.url}/readyz`, { signal: AbortSignal.timeout(2000) });
        await r.arrayBuffer();
        if (r.status === 200) {
          this.ready = true;
          return;
        }
      } catch {
        // not listening yet
      }
      await sleep(100);
    }
    proc.kill('SIGKILL');
    throw new Error(`${this.opts.name} was not ready within ${timeoutMs} ms:\n${this.tail()}`);
  }

  /** kill -9: no shutdown hook runs, in-flight requests die with the process. */
  async kill9(): Promise<void> {
    if (!this.proc) return;
    this.ready = false;
    this.proc.kill('SIGKILL');
    await this.#exited;
    live.delete(this);
  }

  /** SIGTERM (graceful), SIGKILL if it takes longer than `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    this.ready = false;
    if (!this.proc || !this.running) {
      live.delete(this);
      return;
    }
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc?.kill('SIGKILL'), graceMs);
    await this.#exited;
    clearTimeout(t);
    live.delete(this);
  }

  tail(n = 30): string {
    return this.lines
      .slice(-n)
      .map((l) => l.line)
      .join('\n');
  }
}

export async function stopAll(replicas: Iterable<Replica | undefined>): Promise<void> {
  await Promise.all([...replicas].map((r) => r?.stop()));
}
