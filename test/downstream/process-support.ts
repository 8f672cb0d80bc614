/**
 * Service processes for the downstream crash drills: real programs on real
 * sockets, killed with SIGKILL, on this file's own Postgres database (the
 * embedded engine lives inside one process, so these drills need Postgres).
 */
import pg from 'pg';
import { type Child, runTs } from '../client/drills/processes.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

export interface ProcessFixture {
  testDb: TestDatabase;
  url: string;
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** Starts `file` with `env`; resolves with its URL once it prints `<name> listening on <url>`. */
  start(
    file: string,
    name: string,
    env: Record<string, string>,
    keep?: Child[],
  ): Promise<{ url: string; child: Child }>;
  /** Kills what `start` started (not the kept ones). */
  killAll(): Promise<void>;
  close(): Promise<void>;
}

export async function processFixture(): Promise<ProcessFixture> {
  const testDb = await createTestDatabase();
  const url = testDb.url as string;
  const admin = new pg.Pool({ connectionString: url, max: 2 });
  const children: Child[] = [];
  const kept: Child[] = [];
  return {
    testDb,
    url,
    query: async <R>(text: string, params: unknown[] = []) => (await admin.query(text, params)).rows as R[],
    start: async (file, name, env, keep) => {
      const { child, match } = await runTs(file, env, new RegExp(`${name} listening on (http://\\S+)`));
      (keep ?? children).push(child);
      if (keep) kept.push(child);
      return { url: match[1] as string, child };
    },
    killAll: async () => {
      await Promise.all(children.splice(0).map((c) => c.kill9()));
    },
    close: async () => {
      await Promise.all([...children.splice(0), ...kept.splice(0)].map((c) => c.kill9()));
      await admin.end();
      await testDb.drop();
    },
  };
}
