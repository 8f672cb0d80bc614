/** Plain reads. The lapse rules are applied by `row.ts`'s projection, never written here. */
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';
import { CLOCK, effectiveOf, fromDb, type OperationRow, projection } from './row.js';

const READ = `SELECT ${projection('o')} FROM idem_operations o CROSS JOIN ${CLOCK} ${effectiveOf('o')}`;
/** Exported for the benchmark's pgbench scripts (S2's replay reads first). */
export const BY_KEY = statement('read_by_key', `${READ}\n  WHERE o.scope = $scope AND o.key = $key`);
const BY_ID = statement('read_by_id', `${READ}\n  WHERE o.id = $id::uuid`);

export async function readByKey(db: Database, scope: string, key: string): Promise<OperationRow | undefined> {
  const rows = await db.run<Record<string, unknown>>(BY_KEY, { scope, key });
  return rows[0] ? fromDb(rows[0]) : undefined;
}

/** By id alone: on a distributed engine this one asks every shard (the id carries no scope). */
export async function readById(db: Database, id: string): Promise<OperationRow | undefined> {
  const rows = await db.run<Record<string, unknown>>(BY_ID, { id });
  return rows[0] ? fromDb(rows[0]) : undefined;
}
