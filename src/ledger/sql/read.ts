/** Plain reads. Rule A and deadlines are applied by `VIEW`, never written here. */
import { sql } from 'drizzle-orm';
import type { Database } from '../../db/database.js';
import { type OperationRow, VIEW } from './view.js';

export async function readByKey(db: Database, scope: string, key: string): Promise<OperationRow | undefined> {
  const rows = await db.rows<OperationRow>(
    sql`SELECT ${VIEW} FROM idem_operations WHERE scope = ${scope} AND key = ${key}`,
  );
  return rows[0];
}

export async function readById(db: Database, id: string): Promise<OperationRow | undefined> {
  const rows = await db.rows<OperationRow>(sql`SELECT ${VIEW} FROM idem_operations WHERE id = ${id}::uuid`);
  return rows[0];
}
