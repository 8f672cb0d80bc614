/**
 * The service as an operator runs it: a real child process (`node --import tsx
 * src/server.ts`, or any other command line) whose output is kept line by line,
 * so a test can send it signals, break its database and read what it said.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';
import { join } from 'node:path';
import pg from 'pg';
import { freePort, ROOT } from '../drills/support/replica.js';
import { createTestDatabase, dropDatabase, type TestDatabase } from '../support/db.js';
import { currentEngine } from '../support/engine.js';
import { withDatabase } from '../support/global-setup.js';
import { tempDir } from '../support/temp-dir.js';

export { freePort, ROOT, tempDir };

/** Starting a process on a shared 2-core machine (tsx, a fresh embedded cluster): headroom only. */
export const START_MS = 120_000;

/** Every process started here, so a failing test leaves none behind. */
const live = new Set<ChildProcess>();
process.once('exit', () => {
  for (const p of live) p.kill('SIGKILL');
});

export class ServiceProcess {
  readonly lines: string[] = [];
  readonly proc: ChildProcess;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;

  constructor(
    readonly port: number,
    env: Record<string, string | undefined>,
    command: string[] = [process.execPath, '--import', 'tsx', 'src/server.ts'],
  ) {
    const full: Record<string, string | undefined> = { ...process.env, NODE_OPTIONS: undefined };
    delete full.DATABASE_URL;
    Object.assign(full, { HOST: '127.0.0.1', PORT: String(port), LOG_LEVEL: 'info', ...env });
    this.proc = spawn(command[0]!, command.slice(1), {
      cwd: ROOT,
      env: full,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    live.add(this.proc);
    let partial = { out: '', err: '' };
    const keep = (which: 'out' | 'err') => (chunk: Buffer) => {
      const text = partial[which] + chunk.toString('utf8');
      const parts = text.split('\n');
      partial = { ...partial, [which]: parts.pop() ?? '' };
      this.lines.push(...parts.filter(Boolean));
    };
    this.proc.stdout!.on('data', keep('out'));
    this.proc.stderr!.on('data', keep('err'));
    this.exited = new Promise((resolve) =>
      this.proc.once('exit', (code, signal) => {
        live.delete(this.proc);
        if (partial.out) this.lines.push(partial.out);
        if (partial.err) this.lines.push(partial.err);
        resolve({ code, signal });
      }),
    );
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  get running(): boolean {
    return this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** GET a path; the status, or 0 when nothing answered. */
  async status(path: string, headers: Record<string, string> = {}): Promise<number> {
    try {
      const r = await fetch(`${this.url}${path}`, { headers, signal: AbortSignal.timeout(10_000) });
      await r.arrayBuffer();
      return r.status;
    } catch {
      return 0;
    }
  }

  /** Resolves when `path` answers `status`; fails at once if the process exits. */
  async waitFor(path: string, status: number, timeout = START_MS): Promise<void> {
    let last = 0;
    await this.#until(
      async () => {
        last = await this.status(path);
        return last === status;
      },
      timeout,
      () => `${path} answered ${last}, waiting for ${status}`,
    );
  }

  /** Resolves with the first line matching `re`; fails at once if the process exits without one. */
  async waitForLine(re: RegExp, timeout = START_MS): Promise<string> {
    let line: string | undefined;
    await this.#until(
      async () => {
        line = this.lines.find((l) => re.test(l));
        return line !== undefined;
      },
      timeout,
      () => `no line matching ${re}`,
    );
    return line!;
  }

  async #until(done: () => Promise<boolean>, timeout: number, what: () => string): Promise<void> {
    const deadline = Date.now() + timeout;
    for (;;) {
      if (await done()) return;
      if (!this.running) throw new Error(`${what()}, and the process exited:\n${this.tail()}`);
      if (Date.now() > deadline) throw new Error(`${what()} after ${timeout} ms:\n${this.tail()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /** The `msg` of every JSON log line (other lines as they are). */
  messages(): string[] {
    return this.lines.map((l) => {
      try {
        return String((JSON.parse(l) as { msg?: unknown }).msg ?? l);
      } catch {
        return l;
      }
    });
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.proc.kill('SIGTERM');
    const t = setTimeout(() => this.proc.kill('SIGKILL'), 15_000);
    await this.exited;
    clearTimeout(t);
  }

  tail(n = 20): string {
    return this.lines.slice(-n).join('\n');
  }
}

/**
 * The environment that points a service process at this suite's engine: a
 * migrated database of its own on Postgres, a fresh data folder on the
 * embedded engine.
 */
export async function engineEnv(): Promise<{ env: Record<string, string>; drop: () => Promise<void> }> {
  if (currentEngine().kind === 'pglite') {
    return { env: { IDEM_DATA_DIR: join(tempDir(), 'data') }, drop: async () => {} };
  }
  const t: TestDatabase = await createTestDatabase();
  await t.db.close();
  return { env: { DATABASE_URL: t.url! }, drop: () => t.drop() };
}

/** Postgres only: an empty database (never migrated), with its URL. */
export async function emptyDatabase(): Promise<{ url: string; drop: () => Promise<void> }> {
  const engine = currentEngine();
  if (engine.kind !== 'postgres') throw new Error('Postgres only');
  const name = `idem_empty_${Math.random().toString(36).slice(2, 10)}`;
  const admin = async (q: string) => {
    const c = new pg.Client({ connectionString: engine.url });
    await c.connect();
    try {
      await c.query(q);
    } finally {
      await c.end();
    }
  };
  await admin(`CREATE DATABASE "${name}"`);
  return {
    url: withDatabase(engine.url, name),
    drop: () => dropDatabase(engine.url, name),
  };
}

/**
 * A TCP port that refuses connections until `open()`, then forwards them to
 * `target` until `close()` (which also cuts the live ones): a database that
 * is not there yet, or goes away.
 */
export class Gate {
  #server: Server | undefined;
  readonly #sockets = new Set<Socket>();

  private constructor(
    readonly port: number,
    private readonly target: { host: string; port: number },
  ) {}

  static async create(targetUrl: string): Promise<Gate> {
    const u = new URL(targetUrl);
    return new Gate(await freePort(), { host: u.hostname, port: Number(u.port || 5432) });
  }

  /** `url` with its host and port replaced by the gate's. */
  via(url: string): string {
    const u = new URL(url);
    u.hostname = '127.0.0.1';
    u.port = String(this.port);
    return u.toString();
  }

  open(): Promise<void> {
    const server = createServer((client) => {
      const upstream = tcpConnect(this.target.port, this.target.host);
      for (const s of [client, upstream]) {
        this.#sockets.add(s);
        s.once('close', () => this.#sockets.delete(s));
        s.on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    this.#server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.port, '127.0.0.1', () => resolve());
    });
  }

  async close(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    for (const s of this.#sockets) s.destroy();
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}
