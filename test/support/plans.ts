/**
 * The generic plan of a statement (what a named prepared statement runs
 * after its first calls) and how it reads `idem_operations` (or another
 * table): PREPARE, then EXPLAIN EXECUTE with every parameter NULL under
 * `plan_cache_mode = force_generic_plan`. All of it must run in one session,
 * which keeps the plan until the table's statistics change.
 */
import { sql } from 'drizzle-orm';
import pg from 'pg';
import { expect } from 'vitest';
import { declaredStatements, type Statement } from '../../src/db/statement.js';
import '../../src/ledger/sql/rendered.js';
import type { TestDatabase } from './db.js';

/** Runs one text in the session the plan is taken in. */
export type SessionQuery = (text: string) => Promise<Record<string, unknown>[]>;

/** One session: PREPARE, SET and EXPLAIN EXECUTE must share it. */
export interface Session {
  query: SessionQuery;
  close(): Promise<void>;
}

/** A session of its own on Postgres; on the embedded engine, its one session. */
export async function openSession(t: TestDatabase): Promise<Session> {
  if (t.url) {
    const c = new pg.Client({ connectionString: t.url, connectionTimeoutMillis: 10_000 });
    await c.connect();
    return { query: async (text) => (await c.query(text)).rows, close: () => c.end() };
  }
  return { query: (text) => t.db.rows<Record<string, unknown>>(sql.raw(text)), close: async () => {} };
}

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/**
 * The index each read of `idem_operations` in the generic plan goes through
 * (a bitmap scan counts as its index's), or the node type of a read that uses
 * none ("Seq Scan").
 */
export async function genericPlanReads(query: SessionQuery, text: string, params: number): Promise<string[]> {
  const plan = await preparePlan(query, 'plan_probe', text, params);
  try {
    return await plan.reads();
  } finally {
    await plan.deallocate();
  }
}

/** A statement prepared in the session, whose plan can be looked at again as the session keeps it. */
export interface PreparedPlan {
  /** How the cached generic plan reads `relation` (see `genericPlanReads`). */
  reads(relation?: string): Promise<string[]>;
  deallocate(): Promise<void>;
}

/** PREPARE under `plan_cache_mode = force_generic_plan`: its plan is made once and kept. */
export async function preparePlan(
  query: SessionQuery,
  name: string,
  text: string,
  params: number,
): Promise<PreparedPlan> {
  await query('SET plan_cache_mode = force_generic_plan');
  await query(`PREPARE ${name} AS ${text}`);
  const args = params ? `(${Array(params).fill('NULL').join(', ')})` : '';
  return {
    async reads(relation = 'idem_operations') {
      const [row] = await query(`EXPLAIN (FORMAT JSON) EXECUTE ${name}${args}`);
      const raw = row!['QUERY PLAN'] as [{ Plan: PlanNode }] | string;
      const doc = typeof raw === 'string' ? (JSON.parse(raw) as [{ Plan: PlanNode }]) : raw;
      return reads(doc[0].Plan, relation);
    },
    deallocate: async () => {
      await query(`DEALLOCATE ${name}`);
    },
  };
}

function reads(node: PlanNode, relation: string, out: string[] = []): string[] {
  const type = node['Node Type'];
  if (node['Relation Name'] === relation && type !== 'ModifyTable') {
    if (type === 'Bitmap Heap Scan') out.push(...bitmapIndexes(node));
    else out.push(node['Index Name'] ?? type);
  }
  for (const child of node.Plans ?? []) if (type !== 'Bitmap Heap Scan') reads(child, relation, out);
  return out;
}

function bitmapIndexes(node: PlanNode): string[] {
  if (node['Node Type'] === 'Bitmap Index Scan') return [node['Index Name'] ?? '?'];
  return (node.Plans ?? []).flatMap(bitmapIndexes);
}

/** The sweeper's set-based batches walk their partial indexes by design. */
const BATCHES = new Set(['lapse_batch', 'purge_batch']);
export const PKEY = 'idem_operations_pkey';

/**
 * Every named statement that addresses one operation, with the index its
 * generic plan must read `idem_operations` by: the primary key `(scope, key)`,
 * `read_by_id` its id index; `list_events` reads the operation's events by
 * its own index and the operations not at all (null).
 */
export function keyStatements(): { name: string; st: Statement; index: string | null }[] {
  return [...declaredStatements().entries()]
    .filter(([name]) => !BATCHES.has(name))
    .map(([name, st]) => ({
      name,
      st,
      index: name === 'list_events' ? null : name === 'read_by_id' ? 'idem_operations_id_idx' : PKEY,
    }));
}

/** Holds one statement's reads to its index (`keyStatements`). */
export function expectKeyReads(reads: string[], name: string, index: string | null, state: string): void {
  if (index === null) {
    expect(reads, `${name} (${state})`).toEqual([]);
    return;
  }
  expect(reads.length, `${name} (${state}) reads idem_operations`).toBeGreaterThan(0);
  expect(reads, `${name} (${state})`).toEqual(reads.map(() => index));
}

/**
 * Operations `from..to` of `scope`, completed, each with one event: what a
 * ledger of completed work holds, written directly.
 */
export function insertCompleted(scope: string, from: number, to: number): string {
  return `WITH o AS (
      INSERT INTO idem_operations (scope, key, id, fingerprint, effect, status, attempt, version, lease_id,
        lease_expires_at, dispatched_at, request, result, metadata, retention_ms, created_at, updated_at,
        completed_at, retained_until)
      SELECT '${scope}', 'k' || i, gen_random_uuid(), 'fp', 'non_idempotent_write', 'succeeded', 1, 2,
        gen_random_uuid(), now(), now(), '{}', '{}', '{}', 86400000, now(), now(), now(), now() + interval '1 day'
      FROM generate_series(${from}, ${to}) AS i
      RETURNING scope, key, id)
    INSERT INTO idem_events (scope, id, operation_id, key, version, type, at, actor, attempt, detail)
    SELECT scope, gen_random_uuid(), id, key, 2, 'completed', now(), 'test', 1, '{}' FROM o`;
}
