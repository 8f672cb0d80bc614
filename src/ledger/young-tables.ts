/**
 * Keeps the planner statistics of a young ledger current, so that no pooled
 * connection keeps running on plans made while the ledger was nearly empty.
 *
 * Postgres plans a statement from the table's statistics and its current
 * size. Analyzed while it held a few dozen rows (autovacuum's first analyze
 * comes at about 50), a table looks like a page or two, on which a
 * sequential scan is cheaper than any index: every statement that addresses
 * one operation then plans one. A named prepared statement keeps its generic
 * plan until the table's statistics change, not when the table grows, so a
 * connection that made its plan then scans the whole ledger on every call
 * until the next analyze (autovacuum's comes once 10% more rows changed,
 * looked for once a minute; never, where autovacuum is off). An `ANALYZE`
 * makes every session's plans on the table again, from the size it has now.
 *
 * So each sweeper pass (at most once a second) asks which of the ledger's
 * tables were analyzed young and have grown since (`sql/statistics.ts`), and
 * analyzes those: a few times in a ledger's life, each over a few hundred
 * kilobytes. Replicas may do it at once; the second analyze waits for the
 * first and is as cheap. On Citus the coordinator's tables hold no rows, so
 * none is ever young there.
 */
import type { Logger } from 'pino';
import type { Database } from '../db/database.js';
import { loggableError } from '../db/errors.js';
import { analyzeTable, type LedgerTable, youngTables } from './sql/statistics.js';

/** How often the tables are looked at, at most. */
const CHECK_EVERY_MS = 1000;

export interface TendResult {
  analyzed: LedgerTable[];
  /** Young, grown, and not the service role's to analyze. */
  notOwned: LedgerTable[];
}

/** One look: analyzes every young table that has grown, where the role may. */
export async function tendYoungTables(db: Database): Promise<TendResult> {
  const out: TendResult = { analyzed: [], notOwned: [] };
  for (const t of await youngTables(db)) {
    if (!t.mayAnalyze) {
      out.notOwned.push(t.table);
      continue;
    }
    await analyzeTable(db, t.table);
    out.analyzed.push(t.table);
  }
  return out;
}

/** The sweeper's part of it: scheduled, logged, and never in the way of a pass. */
export class YoungTables {
  private nextAt = 0;
  private failing = false;
  private readonly warnedNotOwned = new Set<LedgerTable>();

  constructor(
    private readonly log: Logger,
    /** Schedules the looks: the process's monotonic clock; it decides nothing about a row. */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Looks, when a look is due. Errors are logged (once per outage), never thrown. */
  async tend(db: Database): Promise<void> {
    const now = this.clock();
    if (now < this.nextAt) return;
    this.nextAt = now + CHECK_EVERY_MS;
    try {
      const r = await tendYoungTables(db);
      if (this.failing) this.log.info('young-table check recovered');
      this.failing = false;
      if (r.analyzed.length)
        this.log.info(
          { tables: r.analyzed },
          'analyzed young ledger tables that have grown: plans made while they were nearly empty are made again',
        );
      const fresh = r.notOwned.filter((t) => !this.warnedNotOwned.has(t));
      for (const t of fresh) this.warnedNotOwned.add(t);
      if (fresh.length)
        this.log.warn(
          { tables: fresh },
          'young ledger tables have grown but this role does not own them, so it may not analyze them: statements may scan them whole until autovacuum analyzes them; run ANALYZE on them as their owner',
        );
    } catch (err) {
      if (!this.failing)
        this.log.warn({ err: loggableError(err) }, 'young-table check failed; retrying quietly');
      this.failing = true;
    }
  }
}
