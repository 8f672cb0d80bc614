/**
 * One error table (issue 9, item 4): each code's status, title and retryable
 * live in one row of `ERRORS`, and every answer the service sends for a code
 * carries exactly that row.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERRORS, type ErrorCode } from '../../src/contract/index.js';
import { IdemError } from '../../src/errors.js';
import { buildApp } from '../../src/http/app.js';
import { createTestDatabase, type TestDatabase } from '../support/db.js';

let testDb: TestDatabase;
beforeAll(async () => {
  testDb = await createTestDatabase();
});
afterAll(() => testDb.drop());

const CODES = Object.keys(ERRORS) as ErrorCode[];

describe('the error table', () => {
  it('every row is an HTTP error status with a title', () => {
    for (const code of CODES) {
      const row = ERRORS[code];
      expect(code).toMatch(/^[A-Z][A-Z0-9_]*$/);
      expect(row.status, code).toBeGreaterThanOrEqual(400);
      expect(row.status, code).toBeLessThan(600);
      expect(row.title.length, code).toBeGreaterThan(0);
    }
  });

  it('only the codes whose same request may simply be sent again are retryable', () => {
    const retryable = CODES.filter((c) => ERRORS[c].retryable).sort();
    expect(retryable).toEqual(['OPERATION_IN_PROGRESS', 'RATE_LIMITED', 'REQUEST_TIMEOUT', 'UNAVAILABLE']);
  });

  it('each code is answered with its row: status, title, retryable, type', async () => {
    const app = await buildApp({ db: testDb.db });
    app.get<{ Params: { code: ErrorCode } }>('/test/raise/:code', async (request) => {
      throw new IdemError(request.params.code, 'raised by the test');
    });
    await app.ready();
    try {
      for (const code of CODES) {
        const r = await app.inject({ method: 'GET', url: `/test/raise/${code}` });
        const row = ERRORS[code];
        expect(r.statusCode, code).toBe(row.status);
        expect(r.headers['content-type']).toContain('application/problem+json');
        expect(r.json(), code).toMatchObject({
          type: `urn:idem:problem:${code}`,
          title: row.title,
          status: row.status,
          code,
          retryable: row.retryable,
        });
      }
    } finally {
      await app.close();
    }
  });
});
