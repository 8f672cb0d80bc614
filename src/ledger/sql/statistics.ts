/**
 * The ledger's tables whose planner statistics were taken while they were
 * nearly empty and that have grown since (`ledger/young-tables.ts` analyzes
 * them). Not on the hot path: at most once a second, from the sweeper.
 */
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';

/**
 * The ledger's tables, by the name the statements use. `ANALYZE` is written
 * from this list, never from a name the database returned.
 */
export const LEDGER_TABLES = ['idem_operations', 'idem_events'] as const;
export type LedgerTable = (typeof LEDGER_TABLES)[number];

/**
 * Below this many pages at its last analyze a table is young. Measured on
 * Postgres 15 (docs/performance.md, "Plans made on a near-empty ledger"):
 * analyzed at 3 pages (100 operations) every statement that addresses one
 * operation plans a sequential scan; at 6 pages (200) all of them take the
 * primary key. 32 leaves a margin of five times that.
 */
export const YOUNG_PAGES = 32;
/**
 * A young table is analyzed again once it holds twice the pages of its last
 * analyze, and at least this many more: from an analyze at 0 to 2 pages
 * (autovacuum's first, at about 50 operations) the next comes at 8 to 10.
 */
export const GROWTH_PAGES = 8;

export interface YoungTableRow {
  table: LedgerTable;
  analyzedPages: number;
  pages: number;
  /** The service's role owns the table (or is a superuser): `ANALYZE` would skip it otherwise. */
  mayAnalyze: boolean;
}

/**
 * `reltuples >= 0`: analyzed (or vacuumed) at least once. A table never
 * analyzed is planned as at least ten pages, on which every key lookup takes
 * its index. The current size is the relation's length on disk, which
 * Postgres also plans with, not a statistic.
 */
export const YOUNG_TABLES = sql`
    SELECT c.relname AS "table", c.relpages AS "analyzedPages", s.pages,
      pg_has_role(c.relowner, 'USAGE') AS "mayAnalyze"
    FROM pg_class c
    CROSS JOIN LATERAL (
      SELECT (pg_relation_size(c.oid) / current_setting('block_size')::int)::int AS pages) s
    WHERE c.oid IN (${sql.join(
      LEDGER_TABLES.map((t) => sql`to_regclass(${sql.raw(`'${t}'`)})`),
      sql`, `,
    )})
      AND c.reltuples >= 0 AND c.relpages < ${sql.raw(String(YOUNG_PAGES))}
      AND s.pages >= greatest(2 * c.relpages, c.relpages + ${sql.raw(String(GROWTH_PAGES))})`;

export async function youngTables(db: Database): Promise<YoungTableRow[]> {
  const rows = await db.rows<YoungTableRow>(YOUNG_TABLES);
  return LEDGER_TABLES.flatMap((t) => rows.filter((r) => r.table === t));
}

/** `ANALYZE` one of the ledger's tables: new statistics, and every session's plans on it made again. */
export async function analyzeTable(db: Database, table: LedgerTable): Promise<void> {
  await db.rows(sql.raw(`ANALYZE ${table}`));
}
