/**
 * The background sweeper. Runs in every replica; safe with many at once
 * because each row it changes goes through a guarded statement (a lapse or a
 * purge re-checks its condition on the newest row version). It only makes
 * lapses visible sooner (lists, stats, metrics): reads apply them anyway.
 * With its passes it also keeps a young ledger's planner statistics current
 * (`young-tables.ts`).
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { loggableError } from '../db/errors.js';
import type { Metrics } from '../metrics/metrics.js';
import { type LapseCount, lapseBatch } from './sql/lapse.js';
import { purgeBatch } from './sql/purge.js';
import { YoungTables } from './young-tables.js';

/**
 * Batches per pass, so one pass cannot hog the pool while a backlog drains.
 * Measured (S5: 100,000 expired leases under S1, 3 runs each, coalescing on with
 * two statements of a kind in flight, the default then):
 * 2 a pass kept S1 at 0.74x with p99 1.67x, drained in 7.7 s; 3: 0.69x, 1.79x,
 * 6.8 s; 4: 0.67x, 1.54x, 6.2 s; 20: 0.55x, 2.53x, 6.9 s (the full run).
 */
const MAX_BATCHES_PER_PASS = 4;
/**
 * The pause between passes while a backlog drains, instead of the interval:
 * 100,000 expired leases at 500 a batch would otherwise take 10 intervals.
 * The pause lets the hot path's queued statements through between passes.
 * A longer one (as long as the pass before) was measured under load: the hot
 * path lost less per second but more in all, over a drain 1.6 times as long.
 */
const BACKLOG_PAUSE_MS = 25;

/** How often a pass scans the due leases from the oldest again (see `LeaseScanFloor`). */
const FULL_LEASE_SCAN_EVERY_MS = 60_000;
/** How far behind the database clock the floor stays at least. */
const FLOOR_TRAILS_CLOCK_US = 60_000_000n;

/**
 * Where a sweeper's next due-lease scan starts, so that a pass does not read
 * again the expired leases it left alone: dispatched reads and idempotent
 * writes, which rule A keeps `in_progress` for the next begin to recover, and
 * which stay in the due index until then (`LEASE_FLOOR` in `sql/lapse.ts`).
 *
 * After a batch the floor is where its scan stopped: the last due lease's
 * expiry when the batch filled its limit (`>=`, so leases that share it are
 * read again), the clock when it did not; and never later than a minute
 * before the clock. A lease that a scan missed because its writer had not
 * committed yet expires at its writer's clock plus its length, so it is below
 * the floor only if its writer began more than a minute before the scan
 * (statements time out after 5 s by default). For what no rule foresees (a
 * database clock set back, a failover), the first pass and one a minute scan
 * from the oldest lease again. A lapse written late changes no answer: reads
 * apply rule A themselves.
 *
 * One per sweeper; each replica keeps its own.
 */
export class LeaseScanFloor {
  private afterUs: string | null = null;
  private fullScanAt = 0;

  constructor(
    private readonly fullScanEveryMs = FULL_LEASE_SCAN_EVERY_MS,
    /** Schedules the full scans: the process's monotonic clock, like the pass timer; it decides nothing about a row. */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** The floor for the next batch: null to scan from the oldest lease. */
  get after(): string | null {
    return this.afterUs;
  }

  /** At the start of a pass: from the oldest lease again, when a full scan is due. */
  startPass(): void {
    const now = this.clock();
    if (now < this.fullScanAt) return;
    this.afterUs = null;
    this.fullScanAt = now + this.fullScanEveryMs;
  }

  /** After a batch of `limit`: from where its scan stopped, at most a minute before the clock. */
  advance(batch: LapseCount, limit: number): void {
    const trailing = BigInt(batch.nowUs) - FLOOR_TRAILS_CLOCK_US;
    const stopped = batch.leasesDue >= limit && batch.lastDueUs !== null ? BigInt(batch.lastDueUs) : trailing;
    this.afterUs = (stopped < trailing ? stopped : trailing).toString();
  }
}

export interface SweepResult {
  leaseExpired: number;
  approvalExpired: number;
  purged: number;
}

/**
 * One pass: write due lapses, then purge due records, each in bounded batches.
 * Without a `floor`, every batch scans the due leases from the oldest.
 */
export async function sweepOnce(
  db: Database,
  s: Config['sweep'],
  actor = 'sweeper',
  floor?: LeaseScanFloor,
): Promise<SweepResult> {
  const out: SweepResult = { leaseExpired: 0, approvalExpired: 0, purged: 0 };
  floor?.startPass();
  for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
    const lapsed = await lapseBatch(db, s.batchSize, actor, floor?.after ?? null);
    floor?.advance(lapsed, s.batchSize);
    out.approvalExpired += lapsed.approvalExpired;
    out.leaseExpired += lapsed.n - lapsed.approvalExpired;
    if (lapsed.n < s.batchSize) break;
  }
  for (let i = 0; i < MAX_BATCHES_PER_PASS; i++) {
    const n = await purgeBatch(db, s.purgeBatchSize);
    out.purged += n;
    if (n < s.purgeBatchSize) break;
  }
  return out;
}

/** A pass that filled a batch may have left more due: the next one should follow soon. */
export function filledABatch(r: SweepResult, s: Config['sweep']): boolean {
  return r.leaseExpired + r.approvalExpired >= s.batchSize || r.purged >= s.purgeBatchSize;
}

export class Sweeper {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private stopped = false;
  /** Failing since the last pass that worked: an outage is logged once, and its end once. */
  private failing = false;
  private readonly floor = new LeaseScanFloor();
  /** A young ledger's statistics, looked at with the passes (`young-tables.ts`). */
  private readonly young: YoungTables;

  constructor(
    private readonly db: Database,
    private readonly settings: Config['sweep'],
    private readonly log: Logger,
    private readonly metrics?: Metrics,
  ) {
    this.young = new YoungTables(log);
  }

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  private schedule(backlog = false): void {
    if (this.stopped) return;
    // Jitter spreads replicas' passes apart.
    const delay = backlog ? BACKLOG_PAUSE_MS : this.settings.intervalMs * (0.75 + Math.random() * 0.5);
    this.timer = setTimeout(() => {
      let more = false;
      this.running = this.pass()
        .then(async (m) => {
          more = m;
          // After a failed pass the database is most likely away: the pass has said so once.
          if (!this.failing) await this.young.tend(this.db);
        })
        .finally(() => {
          this.running = undefined;
          this.schedule(more);
        });
    }, delay);
    this.timer.unref();
  }

  /** One pass; true when it filled a batch, so more may be due. */
  private async pass(): Promise<boolean> {
    try {
      const r = await sweepOnce(this.db, this.settings, 'sweeper', this.floor);
      this.metrics?.sweeperRuns.inc({ result: 'ok' });
      this.metrics?.sweeperRows.inc({ kind: 'lease_expired' }, r.leaseExpired);
      this.metrics?.sweeperRows.inc({ kind: 'approval_expired' }, r.approvalExpired);
      this.metrics?.sweeperRows.inc({ kind: 'purged' }, r.purged);
      if (this.failing) this.log.info('sweep recovered');
      this.failing = false;
      if (r.leaseExpired + r.approvalExpired + r.purged > 0) this.log.info(r, 'sweep');
      return filledABatch(r, this.settings);
    } catch (err) {
      this.metrics?.sweeperRuns.inc({ result: 'error' });
      // Every second for the length of an outage would bury the one line that matters;
      // idem_sweeper_runs_total{result="error"} keeps the count.
      if (!this.failing)
        this.log.warn({ err: loggableError(err) }, 'sweep failed; retrying quietly until it works');
      this.failing = true;
      return false;
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }
}
