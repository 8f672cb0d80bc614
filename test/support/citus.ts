/**
 * Test isolation on Citus. `CREATE DATABASE ... TEMPLATE` copies only the
 * coordinator's catalog (the workers' shards and the distribution metadata do
 * not follow), and a new database would need the extension and every node added
 * again. So on Citus the migrator runs once, for real, on the coordinator's
 * database (global setup), and each test file gets its own schema there: the
 * same migration SQL replayed inside it, distributed by the same code the
 * migrator calls, and the file's URL pins `search_path` to it. About half a
 * second per file; DROP SCHEMA ... CASCADE drops the shards on the workers.
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { distributeOnCitus, hasCitus } from '../../src/db/citus.js';
import { MIGRATIONS_FOLDER } from '../../src/db/migrate.js';

async function withClient<T>(url: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** The statements of every migration, in the journal's order. */
function migrationStatements(): string[] {
  const journal = JSON.parse(readFileSync(`${MIGRATIONS_FOLDER}/meta/_journal.json`, 'utf8')) as {
    entries: { tag: string }[];
  };
  return journal.entries.flatMap(({ tag }) => {
    const text = readFileSync(`${MIGRATIONS_FOLDER}/${tag}.sql`, 'utf8');
    // A schema-qualified name would escape the file's schema and touch the shared tables.
    if (/"public"\s*\./.test(text)) {
      throw new Error(`${tag}.sql names "public".*: the Citus test schemas cannot replay it`);
    }
    return text.split('--> statement-breakpoint').filter((s) => s.trim());
  });
}

/** The URL with `search_path` set to one schema, for every connection made from it. */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set('options', `-c search_path=${schema}`);
  return u.toString();
}

/** Fails loudly when the URL is not a Citus coordinator with workers. */
export async function checkCoordinator(url: string): Promise<number> {
  return withClient(url, async (c) => {
    if (!(await hasCitus(c))) {
      throw new Error(`IDEM_TEST_ENGINE=citus, but the database at ${url} has no citus extension`);
    }
    const { rows } = await c.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM citus_get_active_worker_nodes()',
    );
    return rows[0]?.n ?? 0;
  });
}

/** Creates `schema` on the coordinator with the ledger's tables, distributed. */
export async function createCitusSchema(url: string, schema: string): Promise<void> {
  await withClient(url, async (c) => {
    await c.query(`CREATE SCHEMA "${schema}"`);
    await c.query(`SET search_path TO "${schema}"`);
    for (const statement of migrationStatements()) await c.query(statement);
    const distributed = await distributeOnCitus(c);
    if (distributed.length === 0) throw new Error(`Citus: nothing was distributed in ${schema}`);
  });
}

export async function dropCitusSchema(url: string, schema: string): Promise<void> {
  await withClient(url, (c) => c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`));
}
