/**
 * The ledger's read side: what routes, the CLI and `idem/pg` ask of an
 * operation, always in its public shape (effective status applied, no lease
 * id). Nothing outside `ledger/` reads `ledger/sql/` directly.
 */
import type { Operation, OperationEvent } from '../contract/index.js';
import type { Database } from '../db/database.js';
import { toOperation } from './operation.js';
import { listEvents } from './sql/events.js';
import { type ListFilter, listOperations } from './sql/list.js';
import { readById, readByKey } from './sql/read.js';
import { openCounts, type ScopeStatRow, scopeGaugeSource } from './sql/stats.js';

export type { ListFilter, ScopeStatRow };

/** An operation by scope and key, or undefined. */
export async function getByKey(db: Database, scope: string, key: string): Promise<Operation | undefined> {
  const row = await readByKey(db, scope, key);
  return row ? toOperation(row) : undefined;
}

/** An operation by id (any scope: the caller checks the scope), or undefined. */
export async function getById(db: Database, id: string): Promise<Operation | undefined> {
  const row = await readById(db, id);
  return row ? toOperation(row) : undefined;
}

/** The event log of an operation, oldest first; undefined when there is no such operation. */
export async function eventsOf(
  db: Database,
  scope: string,
  key: string,
): Promise<OperationEvent[] | undefined> {
  const row = await readByKey(db, scope, key);
  return row ? listEvents(db, row.scope, row.id) : undefined;
}

/** The position after the last item of a page: `(created_at in microseconds, id)`. */
export interface PagePosition {
  createdUs: string;
  id: string;
}

/** One page of a keyset listing, oldest first, and where the next one starts (null: no more). */
export async function listPage(
  db: Database,
  f: Omit<ListFilter, 'limit'> & { limit: number },
): Promise<{ items: Operation[]; next: PagePosition | null }> {
  const rows = await listOperations(db, { ...f, limit: f.limit + 1 });
  const page = rows.slice(0, f.limit);
  const last = page[page.length - 1];
  return {
    items: page.map(toOperation),
    next: rows.length > f.limit && last ? { createdUs: last.cursorUs, id: last.id } : null,
  };
}

/** Per scope and effective status, the open operations (stats), and the metrics' gauge source. */
export { openCounts, scopeGaugeSource };
