/**
 * Records the Citus plan of every statement a `Database` runs: before running
 * it, the same text with the same parameters goes through `EXPLAIN` on another
 * connection, and the plan is reduced to what matters on a distributed engine:
 * how many shards each step touches and how many steps (subplans) there are.
 */
import type { SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pg from 'pg';
import type { Database } from '../../src/db/database.js';
import { bind } from '../../src/db/statement.js';

export interface PlanRecord {
  /** What the test was doing (set with `label()`). */
  label: string;
  text: string;
  /** Shards per step, in plan order ("Task Count: N"); empty when not distributed. */
  tasks: number[];
  /** Steps Citus runs before the statement itself (recursive planning). */
  subplans: number;
  /** Set when Citus refused to plan the statement. */
  error?: string;
}

/**
 * One shard for every step: what a router query looks like in EXPLAIN. A
 * statement on no distributed table (the readiness check's catalog reads) has
 * no task at all and passes too.
 */
export const isSingleShard = (p: PlanRecord) => !p.error && p.tasks.every((n) => n === 1);

export interface Explaining {
  db: Database;
  plans: PlanRecord[];
  label(name: string): void;
  close(): Promise<void>;
}

export function explaining(inner: Database, url: string): Explaining {
  const dialect = new PgDialect();
  const plans: PlanRecord[] = [];
  const explainer = new pg.Client({ connectionString: url });
  const connected = explainer.connect();
  let current = '';
  const record = async (text: string, params: unknown[]) => {
    const entry: PlanRecord = {
      label: current,
      text: text.replace(/\s+/g, ' ').trim(),
      tasks: [],
      subplans: 0,
    };
    try {
      await connected;
      const res = await explainer.query<{ 'QUERY PLAN': string }>(`EXPLAIN (COSTS OFF) ${text}`, params);
      for (const { 'QUERY PLAN': line } of res.rows) {
        const tasks = /Task Count: (\d+)/.exec(line);
        if (tasks) entry.tasks.push(Number(tasks[1]));
        if (/Distributed Subplan/.test(line)) entry.subplans++;
      }
    } catch (err) {
      entry.error = (err as Error).message;
    }
    plans.push(entry);
  };
  const db: Database = {
    ...inner,
    kind: inner.kind,
    drizzle: inner.drizzle,
    async rows<T>(query: SQL) {
      const { sql: text, params } = dialect.sqlToQuery(query);
      await record(text, params);
      return inner.rows<T>(query);
    },
    async run(st, values) {
      await record(st.text, bind(st, values));
      return inner.run(st, values);
    },
    poolStats: () => inner.poolStats(),
    close: () => inner.close(),
  };
  return {
    db,
    plans,
    label: (name) => {
      current = name;
    },
    close: async () => {
      await connected.catch(() => {});
      await explainer.end();
    },
  };
}
