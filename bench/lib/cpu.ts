/**
 * CPU time per operation, by process, over a measured window: the service
 * process, the load generator (this process, or pgbench), and the Postgres
 * backends serving the bench database. On a small shared machine rates
 * drift with the neighbours' load, while CPU milliseconds per operation stay
 * put and say where a gap to the reference comes from.
 */
import { readFile } from 'node:fs/promises';
import type { BenchDatabase } from './database.js';

/** Clock ticks per second of /proc/<pid>/stat (USER_HZ, 100 on Linux). */
const TICK_MS = 10;

export interface CpuPerOp {
  /** The service process (service side only). */
  serviceMs?: number;
  /** The load generator: this process (undici) or pgbench. */
  driverMs: number;
  /** Postgres client backends of the bench database. */
  postgresMs: number;
  /**
   * Host-wide, not per operation: the share of the window (0 to 1) in which at
   * least one task (`ioSome`) or every non-idle task (`ioFull`) was stalled on
   * I/O, from Linux's pressure stall information (`/proc/pressure/io`). Absent
   * where the kernel gives none. A stall of the disk shows here whoever caused it.
   */
  ioSome?: number;
  ioFull?: number;
}

async function procCpuMs(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return Number.NaN;
  }
}

/** Totals of `/proc/pressure/io` in microseconds, or undefined without PSI. */
async function ioPressureUs(): Promise<{ some: number; full: number } | undefined> {
  try {
    const text = await readFile('/proc/pressure/io', 'utf8');
    const total = (kind: string) => Number(new RegExp(`^${kind} .*total=(\\d+)`, 'm').exec(text)?.[1]);
    const some = total('some');
    const full = total('full');
    return Number.isFinite(some) && Number.isFinite(full) ? { some, full } : undefined;
  } catch {
    return undefined;
  }
}

interface Snapshot {
  /** `performance.now()` when the snapshot was taken, and the I/O pressure totals then. */
  at: number;
  io: { some: number; full: number } | undefined;
  self: number;
  driver: number;
  service: number;
  backends: Map<number, number>;
}

export interface CpuWindow {
  /** Takes the opening snapshot (call when the measured window opens). */
  open(): void;
  /** Takes the closing snapshot. */
  close(): void;
  /** CPU per operation between the two snapshots. */
  result(ops: number): Promise<CpuPerOp | undefined>;
}

/**
 * `driverPid` is pgbench's pid (undefined: this process is the driver);
 * `servicePid` the service's (undefined on the pgbench side).
 */
export function cpuWindow(
  db: BenchDatabase,
  driverPid: () => number | undefined,
  servicePid?: number,
): CpuWindow {
  const snap = async (): Promise<Snapshot> => {
    const at = performance.now();
    const io = await ioPressureUs();
    const pids = await db.query<{ pid: number }>(
      `SELECT pid FROM pg_stat_activity
       WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
         AND application_name IS DISTINCT FROM 'idem-bench'`,
    );
    const backends = new Map<number, number>();
    for (const { pid } of pids) backends.set(pid, await procCpuMs(pid));
    const u = process.cpuUsage();
    const d = driverPid();
    return {
      at,
      io,
      self: (u.user + u.system) / 1000,
      driver: d === undefined ? Number.NaN : await procCpuMs(d),
      service: servicePid === undefined ? Number.NaN : await procCpuMs(servicePid),
      backends,
    };
  };
  let a: Promise<Snapshot> | undefined;
  let b: Promise<Snapshot> | undefined;
  return {
    open() {
      a ??= snap();
    },
    close() {
      b ??= snap();
    },
    async result(ops) {
      if (!a || !b || ops === 0) return undefined;
      const [s0, s1] = await Promise.all([a, b]);
      let pg = 0;
      for (const [pid, ms] of s1.backends) {
        const before = s0.backends.get(pid) ?? 0;
        if (Number.isFinite(ms) && Number.isFinite(before)) pg += ms - before;
      }
      const driver = driverPid() === undefined ? s1.self - s0.self : s1.driver - s0.driver;
      const out: CpuPerOp = { driverMs: driver / ops, postgresMs: pg / ops };
      if (servicePid !== undefined) out.serviceMs = (s1.service - s0.service) / ops;
      const windowUs = (s1.at - s0.at) * 1000;
      if (s0.io && s1.io && windowUs > 0) {
        out.ioSome = (s1.io.some - s0.io.some) / windowUs;
        out.ioFull = (s1.io.full - s0.io.full) / windowUs;
      }
      return out;
    },
  };
}
