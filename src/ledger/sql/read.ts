/** Plain reads. The lapse rules are applied by `row.ts`'s projection, never written here. */
import {
  arrayValues,
  byIdentity,
  coalescerFor,
  type Fold,
  identityOf,
  unnestInput,
} from '../../db/coalesce.js';
import type { Database } from '../../db/database.js';
import { statement } from '../../db/statement.js';
import { CLOCK, effectiveOf, fromDb, type OperationRow, projection } from './row.js';

const READ = `SELECT ${projection('o')} FROM idem_operations o CROSS JOIN ${CLOCK} ${effectiveOf('o')}`;
/** Exported for the benchmark's pgbench scripts (S2's replay reads first). */
export const BY_KEY = statement('read_by_key', `${READ}\n  WHERE o.scope = $scope AND o.key = $key`);
const BY_ID = statement('read_by_id', `${READ}\n  WHERE o.id = $id::uuid`);

/**
 * Several keys in one statement (coalescing, `db/coalesce.ts`): `BY_KEY` over
 * the rows of `input`, one primary-key read each (`OFFSET 0` keeps the lateral
 * subquery from becoming a join a generic plan could scan for), all at one
 * time, the statement's. A key that is not there answers nothing.
 */
const MANY_TYPES = { scope: 'text', key: 'text' } as const;
const MANY_NAMES = Object.keys(MANY_TYPES);
export const BY_KEY_MANY = statement(
  'read_by_key_many',
  `SELECT ${projection('o')} FROM (${unnestInput(MANY_NAMES, MANY_TYPES)}) i
  CROSS JOIN LATERAL (SELECT * FROM idem_operations o WHERE o.scope = i.scope AND o.key = i.key OFFSET 0) o
  CROSS JOIN ${CLOCK} ${effectiveOf('o')}`,
);

export type KeyInput = {
  scope: string;
  key: string;
};

async function readOne(db: Database, v: KeyInput): Promise<OperationRow | undefined> {
  const rows = await db.run<Record<string, unknown>>(BY_KEY, v);
  return rows[0] ? fromDb(rows[0]) : undefined;
}

/** The rows `BY_KEY_MANY` answered, by identity (`identityOf`). */
export async function readManyByKey(
  db: Database,
  vs: readonly KeyInput[],
): Promise<Map<string, OperationRow>> {
  const rows = await db.run<Record<string, unknown>>(BY_KEY_MANY, arrayValues(MANY_NAMES, vs));
  return byIdentity(
    rows.map((raw) => fromDb(raw)),
    (row) => row,
  );
}

/** How reads by key fold (`db/coalesce.ts`). */
const readFold = (db: Database): Fold<KeyInput, OperationRow | undefined> => ({
  identity: identityOf,
  one: (v) => readOne(db, v),
  many: (vs) => readManyByKey(db, vs),
  absent: undefined,
});

/**
 * The row of (scope, key), as it reads now. On a pooled database that
 * coalesces, concurrent reads may share one statement (`BY_KEY_MANY`); each
 * answer is then the row at that statement's time, which began after the call.
 */
export function readByKey(db: Database, scope: string, key: string): Promise<OperationRow | undefined> {
  const co = coalescerFor(db, BY_KEY.name, readFold);
  return co ? co.run({ scope, key }) : readOne(db, { scope, key });
}

/** By id alone: on a distributed engine this one asks every shard (the id carries no scope). */
export async function readById(db: Database, id: string): Promise<OperationRow | undefined> {
  const rows = await db.run<Record<string, unknown>>(BY_ID, { id });
  return rows[0] ? fromDb(rows[0]) : undefined;
}
