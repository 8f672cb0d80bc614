/**
 * Keyset-paginated listing, oldest first, over the caller's scopes.
 * The cursor is the last row's `(created_at, id)`, created_at in exact
 * microseconds, so no row is skipped or repeated between pages.
 */
import { type SQL, sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { CLOCK, effectiveOf, epochMicros, fromDb, type OperationRow, projection } from './row.js';

export interface ListFilter {
  /** Scope patterns of the caller (`orders`, `agent-*`, `*`). */
  patterns: readonly string[];
  scope?: string;
  status?: string;
  effect?: string;
  createdBeforeMs?: number;
  after?: { createdUs: string; id: string };
  limit: number;
}

const likeEscape = (s: string) => s.replace(/[\\%_]/g, (c) => `\\${c}`);

function scopeFilter(patterns: readonly string[]): SQL {
  if (patterns.includes('*')) return sql`true`;
  // One bound parameter per pattern: drizzle spreads a JS array into a tuple.
  const alternatives = patterns.map((p) =>
    p.endsWith('*') ? sql`o.scope LIKE ${`${likeEscape(p.slice(0, -1))}%`}` : sql`o.scope = ${p}`,
  );
  return alternatives.length ? sql`(${sql.join(alternatives, sql` OR `)})` : sql`false`;
}

const PROJECTION = sql.raw(projection('o'));
const FROM_EFFECTIVE = sql.raw(`${CLOCK} ${effectiveOf('o')}`);

export type ListRow = OperationRow & { cursorUs: string };

/** The statement of one filter (its shape changes with the filter, so it is built per call). */
export function listQuery(f: ListFilter): SQL {
  // True of every row; stated so the partial listing index (see schema.ts) can serve the order.
  const where: SQL[] = [scopeFilter(f.patterns), sql`o.created_at IS NOT NULL`];
  if (f.scope !== undefined) where.push(sql`o.scope = ${f.scope}`);
  if (f.status !== undefined) where.push(sql`e.eff = ${f.status}`);
  if (f.effect !== undefined) where.push(sql`o.effect = ${f.effect}`);
  if (f.createdBeforeMs !== undefined) {
    where.push(
      sql`o.created_at < timestamptz 'epoch' + ${f.createdBeforeMs}::float8 * interval '1 millisecond'`,
    );
  }
  if (f.after) {
    where.push(
      sql`(o.created_at, o.id) > (timestamptz 'epoch' + ${f.after.createdUs}::bigint * interval '1 microsecond', ${f.after.id}::uuid)`,
    );
  }
  return sql`
    SELECT ${PROJECTION}, ${sql.raw(epochMicros('o.created_at'))} AS "cursorUs"
    FROM idem_operations o CROSS JOIN ${FROM_EFFECTIVE}
    WHERE ${sql.join(where, sql` AND `)}
    ORDER BY o.created_at, o.id LIMIT ${f.limit}`;
}

export async function listOperations(db: Database, f: ListFilter): Promise<ListRow[]> {
  const rows = await db.rows<Record<string, unknown>>(listQuery(f));
  return rows.map((r) => fromDb<ListRow>(r));
}
