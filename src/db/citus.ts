/**
 * Citus support, detected rather than configured: when the database the
 * service migrates has the `citus` extension, the ledger's tables are
 * hash-distributed by `scope` and the events are co-located with their
 * operations, so every statement about one `(scope, key)` runs on one shard.
 * On plain Postgres and on the embedded engine nothing here runs.
 */

/** The part of a pg client this module needs (a `pg.Client` or a pool client). */
export interface Queryable {
  query<R extends Record<string, unknown> = Record<string, unknown>>(
    text: string,
    values?: unknown[],
  ): Promise<{ rows: R[] }>;
}

/**
 * What is distributed, in order: the co-located table follows the table it is
 * co-located with. Every primary key starts with `scope`, which Citus requires
 * of a unique index on a distributed table.
 */
export const DISTRIBUTION = [
  { table: 'idem_operations', column: 'scope', colocateWith: undefined },
  { table: 'idem_events', column: 'scope', colocateWith: 'idem_operations' },
] as const;

/** A row when the connected database has the `citus` extension installed. */
export const CITUS_INSTALLED = `SELECT 1 FROM pg_extension WHERE extname = 'citus'`;

/** True when the connected database has the `citus` extension installed. */
export async function hasCitus(client: Queryable): Promise<boolean> {
  const { rows } = await client.query(CITUS_INSTALLED);
  return rows.length > 0;
}

interface Placement {
  column: string | null;
  method: string;
  colocation: number;
}

/** How a table is distributed now, or undefined while it is a plain local table. */
async function placement(client: Queryable, table: string): Promise<Placement | undefined> {
  // Table names resolve through search_path, as the migrations' unqualified DDL did.
  const { rows } = await client.query<{ column: string | null; method: string; colocation: number }>(
    `SELECT column_to_column_name(logicalrelid, partkey) AS "column", partmethod AS method,
            colocationid AS colocation
       FROM pg_dist_partition WHERE logicalrelid = to_regclass($1)`,
    [table],
  );
  return rows[0];
}

/**
 * Distributes the ledger's tables when the database is Citus; a no-op
 * elsewhere. Idempotent: a table already distributed as wanted is left alone,
 * so every replica may run it at every start. A table distributed some other
 * way (another column, a reference table, not co-located) is an operator's
 * choice this code will not undo: it stops with a message saying what differs.
 * Returns the tables it distributed by this call.
 */
export async function distributeOnCitus(client: Queryable): Promise<string[]> {
  if (!(await hasCitus(client))) return [];
  const done: string[] = [];
  for (const { table, column, colocateWith } of DISTRIBUTION) {
    const now = await placement(client, table);
    if (!now) {
      // Existing rows (a ledger that ran on plain Postgres first) are copied into
      // the shards; the table is locked while that happens.
      await client.query(
        colocateWith
          ? `SELECT create_distributed_table($1, $2, colocate_with => $3)`
          : `SELECT create_distributed_table($1, $2)`,
        colocateWith ? [table, column, colocateWith] : [table, column],
      );
      done.push(table);
      continue;
    }
    if (now.method !== 'h' || now.column !== column) {
      throw new Error(
        `Citus: ${table} is already distributed (method ${now.method}, column ${now.column ?? 'none'}), ` +
          `not hash-distributed by ${column}; undistribute it (undistribute_table) or distribute it by ${column}`,
      );
    }
    if (colocateWith) {
      const other = await placement(client, colocateWith);
      if (other && other.colocation !== now.colocation) {
        throw new Error(
          `Citus: ${table} is distributed by ${column} but not co-located with ${colocateWith}; ` +
            `run SELECT update_distributed_table_colocation('${table}', colocate_with => '${colocateWith}')`,
        );
      }
    }
  }
  return done;
}
