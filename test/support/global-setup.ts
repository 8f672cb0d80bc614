/**
 * vitest global setup: picks the engine, and on Postgres builds one template
 * database from the migrations; every test file clones it (see db.ts). On
 * Citus the migrations run on the coordinator's database itself and every test
 * file gets a schema instead (see citus.ts).
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { loadConfig } from '../../src/config.js';
import { postgresDatabase } from '../../src/db/database.js';
import { MIGRATIONS_FOLDER, migrateDatabase } from '../../src/db/migrate.js';
import { checkCoordinator } from './citus.js';
import type { TestEngine } from './engine.js';

let stopContainer: (() => Promise<void>) | undefined;

async function dockerAnswers(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers');
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 5000)),
    ]);
    return true;
  } catch {
    return false;
  }
}

async function pickEngine(): Promise<TestEngine> {
  if (process.env.IDEM_TEST_ENGINE === 'pglite') return { kind: 'pglite' };
  if (process.env.IDEM_TEST_ENGINE === 'citus') {
    const url = process.env.IDEM_CITUS_URL || process.env.DATABASE_URL;
    if (!url)
      throw new Error('IDEM_TEST_ENGINE=citus needs the coordinator URL in IDEM_CITUS_URL or DATABASE_URL');
    return {
      kind: 'postgres',
      url,
      source: process.env.IDEM_CITUS_URL ? 'IDEM_CITUS_URL' : 'DATABASE_URL',
      citus: true,
    };
  }
  if (process.env.DATABASE_URL)
    return { kind: 'postgres', url: process.env.DATABASE_URL, source: 'DATABASE_URL' };
  if (await dockerAnswers()) {
    const { PostgreSqlContainer } = await import('@testcontainers/postgresql');
    const c = await new PostgreSqlContainer('postgres:16-alpine').start();
    stopContainer = async () => {
      await c.stop();
    };
    return { kind: 'postgres', url: c.getConnectionUri(), source: 'testcontainers' };
  }
  return { kind: 'pglite' };
}

/** The template's name changes with the migrations, so a stale one is never reused. */
export function templateName(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(MIGRATIONS_FOLDER).sort()) {
    if (f.endsWith('.sql')) h.update(readFileSync(`${MIGRATIONS_FOLDER}/${f}`));
  }
  return `idem_tpl_${h.digest('hex').slice(0, 12)}`;
}

export function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function buildTemplate(url: string): Promise<void> {
  const name = templateName();
  const admin = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await admin.connect();
  try {
    const exists = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (exists.rowCount) return;
    const building = `${name}_building_${process.pid}`;
    await admin.query(`CREATE DATABASE "${building}"`);
    const tplUrl = withDatabase(url, building);
    const db = postgresDatabase(tplUrl, loadConfig({}).db);
    try {
      await migrateDatabase(db, tplUrl);
    } finally {
      await db.close();
    }
    // Rename into place: a half-built template is never visible under its name.
    await admin.query(`ALTER DATABASE "${building}" RENAME TO "${name}"`).catch(async (err) => {
      await admin.query(`DROP DATABASE IF EXISTS "${building}"`);
      if ((err as { code?: string }).code !== '42P04') throw err;
    });
  } finally {
    await admin.end();
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const engine = await pickEngine();
  project.provide('testEngine', engine);
  if (engine.kind === 'postgres' && engine.citus) {
    const workers = await checkCoordinator(engine.url);
    console.log(`[idem tests] engine: Citus (${engine.source}), coordinator and ${workers} worker(s)`);
    // The real migrator, distribution included, on the coordinator's database.
    const db = postgresDatabase(engine.url, loadConfig({}).db);
    try {
      await migrateDatabase(db, engine.url);
    } finally {
      await db.close();
    }
  } else if (engine.kind === 'postgres') {
    console.log(`[idem tests] engine: Postgres (${engine.source})`);
    await buildTemplate(engine.url);
  } else {
    console.log(
      process.env.IDEM_TEST_ENGINE === 'pglite'
        ? '[idem tests] engine: embedded PGlite (IDEM_TEST_ENGINE=pglite)'
        : '[idem tests] engine: embedded PGlite: no DATABASE_URL and no Docker engine answered; ' +
            'tests that need real concurrency are skipped. Set DATABASE_URL to run them.',
    );
  }
  return async () => {
    await stopContainer?.();
  };
}
