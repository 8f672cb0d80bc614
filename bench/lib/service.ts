/**
 * The service under test, as its own process: `node dist/server.js` after
 * `npm run build` (or `node --import tsx src/server.ts` when the build fails),
 * configured only through its environment, like production.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

export const ROOT = new URL('../..', import.meta.url).pathname;

export interface ServiceBuild {
  /** argv after `node`. */
  args: string[];
  kind: 'dist' | 'tsx';
  note?: string;
}

/** `npm run build`; on failure the service runs from source through tsx, and the report says so. */
export async function buildService(): Promise<ServiceBuild> {
  const r = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn('npm', ['run', 'build', '--silent'], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.stderr.on('data', (d: Buffer) => {
      out += d.toString();
    });
    child.on('close', (code) => resolve({ code, out }));
  });
  if (r.code === 0 && existsSync(join(ROOT, 'dist/server.js'))) {
    return { args: [join(ROOT, 'dist/server.js')], kind: 'dist' };
  }
  return {
    args: ['--import', 'tsx', join(ROOT, 'src/server.ts')],
    kind: 'tsx',
    note: `npm run build failed (exit ${r.code}); the service ran from source via tsx: ${r.out.trim().split('\n').slice(0, 3).join(' | ')}`,
  };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

export interface ServiceOptions {
  build: ServiceBuild;
  /** Postgres; absent: the embedded engine (give `IDEM_DATA_DIR` in `env`), migrated on start. */
  databaseUrl?: string;
  poolMax: number;
  logFile: string;
  env?: Record<string, string>;
}

export interface Memory {
  /** Peak resident set (VmHWM), KiB. */
  peakKiB: number;
  /** Resident set right after readiness, KiB. */
  idleKiB: number;
}

async function status(pid: number, field: string): Promise<number> {
  const text = await readFile(`/proc/${pid}/status`, 'utf8');
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

export class Service {
  idleKiB = Number.NaN;

  private constructor(
    readonly url: string,
    private readonly child: ChildProcess,
    private readonly exited: Promise<number | null>,
  ) {}

  get pid(): number {
    return this.child.pid!;
  }

  static async start(o: ServiceOptions): Promise<Service> {
    const port = await freePort();
    const log = createWriteStream(o.logFile, { flags: 'a' });
    const child = spawn(process.execPath, o.build.args, {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '',
        ...(o.databaseUrl && { DATABASE_URL: o.databaseUrl, IDEM_MIGRATE_ON_START: 'false' }),
        HOST: '127.0.0.1',
        PORT: String(port),
        IDEM_DB_POOL_MAX: String(o.poolMax),
        LOG_LEVEL: 'warn',
        ...o.env,
      },
    });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const svc = new Service(`http://127.0.0.1:${port}`, child, exited);
    // The embedded engine migrates on start: on a busy 2-core machine that took 25 s.
    const readyMs = o.databaseUrl ? 30_000 : 120_000;
    const deadline = Date.now() + readyMs;
    let gone = false;
    void exited.then(() => {
      gone = true;
    });
    for (;;) {
      if (gone) throw new Error(`the service exited during start; see ${o.logFile}`);
      try {
        const res = await fetch(`${svc.url}/readyz`);
        if (res.status === 200) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        await svc.stop();
        throw new Error(`the service was not ready within ${readyMs / 1000} s; see ${o.logFile}`);
      }
      await sleep(100);
    }
    svc.idleKiB = await status(svc.pid, 'VmRSS').catch(() => Number.NaN);
    return svc;
  }

  /** Peak RSS so far (the kernel's high-water mark of this process). */
  async peakKiB(): Promise<number> {
    return status(this.pid, 'VmHWM').catch(() => Number.NaN);
  }

  /** SIGTERM (graceful: in-flight requests finish), SIGKILL after 15 s. Returns the memory figures. */
  async stop(): Promise<Memory> {
    const peakKiB = await this.peakKiB();
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill('SIGTERM');
      const killed = await Promise.race([this.exited.then(() => false), sleep(15_000).then(() => true)]);
      if (killed) {
        this.child.kill('SIGKILL');
        await this.exited;
      }
    }
    return { peakKiB, idleKiB: this.idleKiB };
  }
}
