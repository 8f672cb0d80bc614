/**
 * The hot path's own node-postgres query (`src/db/statement-query.ts`): it
 * learns a statement's row layout from the first execution and asks for no
 * description afterwards, and reads timestamps as epoch milliseconds. These
 * tests hold it to node-postgres's own answers, on real Postgres.
 */
import fc from 'fast-check';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { statement } from '../../src/db/statement.js';
import { runStatement, timestampMs } from '../../src/db/statement-query.js';
import { currentEngine, onPostgres } from '../support/engine.js';

const SHAPES = statement(
  'test_statement_query_shapes',
  `SELECT $text::text AS text, $n::int AS n, $big::bigint AS big, $f::float8 AS f, $flag::boolean AS flag,
          $doc::jsonb AS doc, $id::uuid AS id, $at::timestamptz AS at, NULL::text AS nothing`,
);
const FAILS = statement('test_statement_query_fails', 'SELECT 1 / $d::int AS q');
const LABELS = statement(
  'test_statement_query_labels',
  `SELECT 1 AS "quote""d", 2 AS "back\\slash", 3 AS "two words", 4 AS "}; throw 1; ({", 5 AS "é"`,
);
const PRINT = statement(
  'test_statement_query_print',
  `SELECT (timestamptz 'epoch' + $us::bigint * interval '1 microsecond')::text AS printed`,
);

const VALUES = {
  text: 'a\u00e9\u{1f600}',
  n: 42,
  big: '9007199254740993',
  f: 1.5,
  flag: true,
  doc: '{"a":[1,2,{"b":null}]}',
  id: '6f1c7e2e-0b7a-4d1e-9a51-1f2d3c4b5a69',
  at: '2026-12-01T10:11:12.345678Z',
};

describe.skipIf(!onPostgres())('the hot path query over node-postgres', () => {
  let pool: pg.Pool;

  beforeAll(() => {
    const engine = currentEngine();
    if (engine.kind !== 'postgres') return;
    pool = new pg.Pool({ connectionString: engine.url, max: 3 });
  });
  afterAll(async () => {
    await pool?.end();
  });

  /** What node-postgres's own Query answers for the same statement and values. */
  async function reference(named: boolean): Promise<Record<string, unknown>[]> {
    const values = SHAPES.params.map((p) => (VALUES as Record<string, unknown>)[p]);
    const r = await pool.query({ name: named ? `${SHAPES.name}_ref` : undefined, text: SHAPES.text, values });
    return r.rows.map((row) => ({ ...row, at: (row.at as Date).getTime() }));
  }

  it.each([true, false])(
    'answers what node-postgres answers, first and later runs, named=%s',
    async (named) => {
      const expected = await reference(named);
      expect(expected[0]?.at).toBe(Date.parse('2026-12-01T10:11:12.345Z'));
      // Several runs at once: the first ones describe the result, the later ones use the learnt layout,
      // on connections that prepared the statement and on ones that did not.
      const runs = await Promise.all(
        Array.from({ length: 8 }, () => runStatement(pool, SHAPES, VALUES, named)),
      );
      for (const rows of runs) expect(rows).toEqual(expected);
      const later = await runStatement(pool, SHAPES, VALUES, named);
      expect(later).toEqual(expected);
    },
  );

  it('runs on a checked-out client as on the pool', async () => {
    const c = await pool.connect();
    try {
      expect(await runStatement(c, SHAPES, VALUES, true)).toEqual(await reference(false));
    } finally {
      c.release();
    }
  });

  it('a failing statement rejects with the database error, and the connection serves the next one', async () => {
    const c = await pool.connect();
    try {
      await expect(runStatement(c, FAILS, { d: 0 }, true)).rejects.toMatchObject({ code: '22012' });
      expect(await runStatement(c, FAILS, { d: 1 }, true)).toEqual([{ q: 1 }]);
    } finally {
      c.release();
    }
    // Through the pool: the client goes back whole (else this would wait for a fourth connection).
    for (let i = 0; i < 5; i++)
      await expect(runStatement(pool, FAILS, { d: 0 }, true)).rejects.toThrow(/division/);
    expect(await runStatement(pool, FAILS, { d: 2 }, true)).toEqual([{ q: 0 }]);
  });

  it('keeps any column label as it is, whatever characters it holds', async () => {
    for (let run = 0; run < 2; run++) {
      expect(await runStatement(pool, LABELS, {}, true)).toEqual([
        { 'quote"d': 1, 'back\\slash': 2, 'two words': 3, '}; throw 1; ({': 4, é: 5 },
      ]);
    }
  });

  it('refuses a parameter that is not text, a number, a boolean or null', async () => {
    await expect(runStatement(pool, FAILS, { d: { n: 1 } }, true)).rejects.toThrow(TypeError);
    await expect(runStatement(pool, FAILS, { d: [1] }, true)).rejects.toThrow(TypeError);
  });

  it.each(['UTC', 'Asia/Kolkata', 'America/St_Johns'])(
    'reads a timestamp as node-postgres does, in time zone %s',
    async (zone) => {
      const c = await pool.connect();
      try {
        await c.query(`SET TimeZone = '${zone}'`);
        const parse = pg.types.getTypeParser(1184, 'text') as (s: string) => Date;
        await fc.assert(
          fc.asyncProperty(
            // Milliseconds and microseconds, years 1 to 9999 (years under 100 take node-postgres's own path).
            fc.integer({ min: -62_135_596_800_000, max: 253_402_300_799_999 }),
            fc.integer({ min: 0, max: 999 }),
            async (ms, micro) => {
              const us = (BigInt(ms) * 1000n + BigInt(micro)).toString();
              const [row] = await runStatement<{ printed: string }>(c, PRINT, { us }, true);
              const printed = row!.printed;
              expect(timestampMs(printed)).toBe(parse(printed).getTime());
            },
          ),
          { numRuns: 200 },
        );
      } finally {
        await c.query('RESET TimeZone');
        c.release();
      }
    },
  );
});

describe('timestampMs', () => {
  it('reads the UTC form, truncating to the millisecond', () => {
    expect(timestampMs('2026-12-01 10:11:12.345678+00')).toBe(Date.parse('2026-12-01T10:11:12.345Z'));
    expect(timestampMs('2026-12-01 10:11:12+00')).toBe(Date.parse('2026-12-01T10:11:12Z'));
    expect(timestampMs('2026-12-01 10:11:12.9+00')).toBe(Date.parse('2026-12-01T10:11:12.900Z'));
  });
  it('hands every other form to node-postgres', () => {
    expect(timestampMs('2026-12-01 15:41:12.345+05:30')).toBe(Date.parse('2026-12-01T10:11:12.345Z'));
    expect(timestampMs('0050-01-01 00:00:00+00')).toBe(
      (pg.types.getTypeParser(1184, 'text')('0050-01-01 00:00:00+00') as Date).getTime(),
    );
    expect(timestampMs('infinity')).toBe(Number.POSITIVE_INFINITY);
  });
});
