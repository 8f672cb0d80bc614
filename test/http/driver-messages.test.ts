/**
 * Driver messages are never logged verbatim (issue 8): a database error's
 * message, detail and hint can quote the value the database refused
 * (`invalid input syntax for type uuid: "urn:uuid:<lease id>"`), and drizzle's
 * message carries every parameter. The log line names the SQLSTATE, the
 * routine and the route instead. The errors here are real ones from the
 * engine under test, raised by a route added to the real app for the test.
 */
import { randomUUID } from 'node:crypto';
import { Writable } from 'node:stream';
import { sql } from 'drizzle-orm';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loggableError } from '../../src/db/errors.js';
import { buildApp, LOG_REDACT } from '../../src/http/app.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase();
});
afterAll(() => testDb.drop());

/** Statements the database refuses while quoting `secret`, in its message or its detail. */
const QUOTING: [string, string, (secret: string) => ReturnType<typeof sql>][] = [
  ['a uuid cast', '22P02', (s) => sql`SELECT ${`urn:uuid:${s}`}::uuid`],
  ['an integer cast', '22P02', (s) => sql`SELECT ${s}::int`],
  ['a jsonb cast (quoted in detail)', '22P02', (s) => sql`SELECT ${`{"a": ${s}}`}::jsonb`],
  ['a raised exception', 'P0001', (s) => sql`DO $$ BEGIN RAISE EXCEPTION '%', ${sql.raw(`'${s}'`)}; END $$`],
];

describe('what of a database error is logged', () => {
  for (const [what, code, statement] of QUOTING) {
    it(`${what}: the SQLSTATE, never the quoted value`, async () => {
      const secret = `secret-${randomUUID()}`;
      const err = await testDb.db.rows(statement(secret)).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err, 'the statement must fail').toBeDefined();
      // The raw error does quote it: that is what must not reach the log.
      expect(JSON.stringify(err, Object.getOwnPropertyNames(err as object)) + String(err)).toContain(secret);
      const logged = loggableError(err);
      expect(JSON.stringify(logged)).not.toContain(secret);
      expect(logged.code).toBe(code);
      expect(String(logged.message)).toContain(code);
    });
  }

  it('a failing route logs the SQLSTATE and the route, and answers a bare 500', async () => {
    const lines: string[] = [];
    const stream = new Writable({
      write(chunk, _enc, cb) {
        lines.push(String(chunk));
        cb();
      },
    });
    const logger = pino({ level: 'trace', redact: { paths: LOG_REDACT, censor: '[redacted]' } }, stream);
    const app = await buildApp({ db: testDb.db, logger });
    // A route whose statement quotes its input back, as a bug in a real route would.
    app.post<{ Body: { v: string } }>('/test/quoting/:tag', async (request) =>
      testDb.db.rows(sql`SELECT ${request.body.v}::uuid`),
    );
    await app.ready();
    try {
      const secret = `urn:uuid:${randomUUID()}`;
      const r = await app.inject({ method: 'POST', url: '/test/quoting/x', payload: { v: secret } });
      expect(r.statusCode).toBe(500);
      expect(r.json()).toMatchObject({ code: 'INTERNAL', retryable: false });
      expect(r.body).not.toContain(secret);
      const log = lines.join('');
      expect(log).not.toContain(secret);
      const entry = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'unhandled error');
      expect(entry, log).toBeDefined();
      expect(entry.route).toBe('/test/quoting/:tag');
      expect(entry.err.code).toBe('22P02');
    } finally {
      await app.close();
    }
  });
});
