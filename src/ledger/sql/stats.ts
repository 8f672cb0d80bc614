/** Per-scope counts of open operations, for `GET /v1/stats` and the metrics gauges. */
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { CLOCK, effectiveOf, lapsedColumns } from './row.js';

export interface ScopeStatRow {
  scope: string;
  status: string;
  n: number;
  oldestMs: number | null;
}

const OPEN_RAW = "status IN ('pending_approval', 'ready', 'in_progress', 'outcome_unknown')";
const OPEN = sql.raw(OPEN_RAW);
const FROM_EFFECTIVE = sql.raw(`${CLOCK} ${effectiveOf('o')}`);
const UPDATED_AT = sql.raw(lapsedColumns('o', 'e.eff').updated_at);

/** Per scope and effective status: how many open operations, and the oldest's age. */
export const OPEN_COUNTS = sql`
    SELECT scope, status, count(*)::int AS n,
      (extract(epoch FROM now() - min(updated_at)) * 1000)::float8 AS "oldestMs"
    FROM (SELECT o.scope, e.eff AS status, ${UPDATED_AT} AS updated_at
          FROM idem_operations o CROSS JOIN ${FROM_EFFECTIVE} WHERE o.${OPEN}) open_ops
    -- A lapse can turn an open row terminal (an expired approval reads as rejected).
    WHERE ${OPEN}
    GROUP BY scope, status ORDER BY scope, status`;

export async function openCounts(db: Database, scopes?: (scope: string) => boolean): Promise<ScopeStatRow[]> {
  const rows = await db.rows<ScopeStatRow>(OPEN_COUNTS);
  return scopes ? rows.filter((r) => scopes(r.scope)) : rows;
}

/** For the `idem_outcome_unknown_*` gauges. */
export function scopeGaugeSource(db: Database) {
  return async () =>
    (await openCounts(db))
      .filter((r) => r.status === 'outcome_unknown')
      .map((r) => ({ scope: r.scope, unknown: r.n, oldestAgeS: (r.oldestMs ?? 0) / 1000 }));
}
