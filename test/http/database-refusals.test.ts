/**
 * A database that refuses the service's login answers 503 UNAVAILABLE with
 * Retry-After, never 500 (issue 8): a role that may not log in (28000), a role
 * over its CONNECTION LIMIT (53300), a database that does not exist (3D000).
 * Each uses a role or database of its own: a superuser ignores connection
 * limits. Postgres only: the embedded engine has no logins.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { postgresDatabase } from '../../src/db/database.js';
import { buildApp } from '../../src/http/app.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { currentEngine, onPostgres } from '../support/engine.js';

const suffix = randomBytes(4).toString('hex');
const ROLES = {
  nologin: `idem_nologin_${suffix}`,
  limit0: `idem_limit0_${suffix}`,
  limit1: `idem_limit1_${suffix}`,
};

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const engine = currentEngine();
  if (engine.kind !== 'postgres') throw new Error('Postgres only');
  const c = new pg.Client({ connectionString: engine.url });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const as = (url: string, user: string, database?: string) => {
  const u = new URL(url);
  u.username = user;
  u.password = '';
  if (database) u.pathname = `/${database}`;
  return u.toString();
};

describe.skipIf(!onPostgres())('a database that refuses the login is 503, not 500', () => {
  let testDb: TestDatabase;
  beforeAll(async () => {
    testDb = await createTestDatabase();
    await admin(async (c) => {
      await c.query(`CREATE ROLE "${ROLES.nologin}" NOLOGIN`);
      await c.query(`CREATE ROLE "${ROLES.limit0}" LOGIN CONNECTION LIMIT 0`);
      await c.query(`CREATE ROLE "${ROLES.limit1}" LOGIN CONNECTION LIMIT 1`);
    });
  });
  afterAll(async () => {
    await testDb?.drop();
    await admin(async (c) => {
      for (const r of Object.values(ROLES)) await c.query(`DROP ROLE IF EXISTS "${r}"`);
    });
  });

  async function expectUnavailable(url: string, what: string) {
    const db = postgresDatabase(url, { ...loadConfig({}).db, connectTimeoutMs: 5000 });
    const app = await buildApp({ db });
    await app.ready();
    try {
      for (const [method, path, payload] of [
        ['POST', '/v1/scopes/orders/operations', { key: `refused/${randomUUID()}`, request: {} }],
        ['GET', `/v1/scopes/orders/operations/${randomUUID()}`, undefined],
        ['GET', '/v1/operations', undefined],
      ] as const) {
        const r = await app.inject({ method, url: path, ...(payload ? { payload } : {}) });
        expect(r.statusCode, `${what}, ${method} ${path}: ${r.body}`).toBe(503);
        expect(r.headers['content-type']).toContain('application/problem+json');
        expect(r.json()).toMatchObject({ code: 'UNAVAILABLE', retryable: true });
        expect(r.headers['retry-after']).toBe('1');
      }
      const ready = await app.inject({ method: 'GET', url: '/readyz' });
      expect(ready.statusCode, `${what}, readyz: ${ready.body}`).toBe(503);
    } finally {
      await app.close();
      await db.close();
    }
  }

  it('a role without LOGIN (28000)', async () => {
    await expectUnavailable(as(testDb.url!, ROLES.nologin), 'NOLOGIN');
  });

  it('a role with CONNECTION LIMIT 0 (53300)', async () => {
    await expectUnavailable(as(testDb.url!, ROLES.limit0), 'CONNECTION LIMIT 0');
  });

  it('a role with CONNECTION LIMIT 1 whose one connection is taken (53300)', async () => {
    const holder = new pg.Client({ connectionString: as(testDb.url!, ROLES.limit1) });
    await holder.connect();
    try {
      await expectUnavailable(as(testDb.url!, ROLES.limit1), 'CONNECTION LIMIT 1, taken');
    } finally {
      await holder.end();
    }
  });

  it('a database that does not exist (3D000)', async () => {
    await expectUnavailable(as(testDb.url!, 'postgres', `idem_missing_${suffix}`), 'no such database');
  });
});
