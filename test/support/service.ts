/**
 * The real ledger service for tests: an isolated database, the real app, and
 * (for tests that need real HTTP between processes) a listening socket.
 */
import type { FastifyInstance } from 'fastify';
import { type ApiKey, KeyStore } from '../../src/auth/keys.js';
import type { Database } from '../../src/db/database.js';
import { buildApp } from '../../src/http/app.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export interface TestApp {
  app: FastifyInstance;
  db: Database;
  testDb: TestDatabase;
  close(): Promise<void>;
}

export interface TestAppOptions {
  keys?: ApiKey[];
  /** Reuse a database (another replica on it) instead of creating one. */
  testDb?: TestDatabase;
  logger?: Parameters<typeof buildApp>[0]['logger'];
  /** Pool settings for this app's database connections. */
  dbSettings?: Parameters<typeof createTestDatabase>[0];
}

/** An app for `inject`, on its own database unless one is given. */
export async function createTestApp(opts: TestAppOptions = {}): Promise<TestApp> {
  const testDb = opts.testDb ?? (await createTestDatabase(opts.dbSettings));
  const db = opts.testDb ? testDb.openAnother(opts.dbSettings) : testDb.db;
  const app = await buildApp({ db, keys: new KeyStore(opts.keys ?? []), logger: opts.logger ?? false });
  await app.ready();
  return {
    app,
    db,
    testDb,
    close: async () => {
      await app.close();
      if (!opts.testDb) await testDb.drop();
    },
  };
}

export interface RunningService extends TestApp {
  url: string;
}

/** The real service listening on 127.0.0.1 with an ephemeral port; open access unless keys are given. */
export async function startService(opts: TestAppOptions = {}): Promise<RunningService> {
  const t = await createTestApp(opts);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  const addr = t.app.server.address();
  if (!addr || typeof addr === 'string') throw new Error('no address');
  return { ...t, url: `http://127.0.0.1:${addr.port}` };
}
