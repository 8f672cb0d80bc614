/**
 * The embedded engine's named prepared statements (`src/db/pglite-statements.ts`):
 * the same answers as PGlite's own `query()`, each statement prepared once per
 * engine, errors that leave the session usable, PGlite's transaction lock
 * respected, and (for `idem/pg`) statements run inside a caller's transaction.
 * Each test runs its own in-memory PGlite, so the suite runs it once, with the
 * embedded engine.
 */
import { PGlite } from '@electric-sql/pglite';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { type PgliteRun, pgliteStatements } from '../../src/db/pglite-statements.js';
import { bind, statement } from '../../src/db/statement.js';
import { currentEngine } from '../support/engine.js';

const SHAPES = statement(
  'test_pglite_shapes',
  `SELECT $text::text AS text, $n::int AS n, $big::bigint AS big, $f::float8 AS f, $flag::boolean AS flag,
          $doc::jsonb AS doc, $obj::jsonb AS obj, $id::uuid AS id, $at::timestamptz AS at,
          $date::timestamptz AS date, $untyped AS untyped, NULL::text AS nothing`,
);
const FAILS = statement('test_pglite_fails', 'SELECT 1 / $d::int AS q');
const READ = statement('test_pglite_read', 'SELECT v FROM t WHERE k = $k');
const WRITE = statement('test_pglite_write', 'INSERT INTO t (k, v) VALUES ($k, $v) RETURNING v');

const VALUES = {
  text: "a'\u00e9\u{1f600}\\",
  n: 42,
  big: '9007199254740993',
  f: 1.5,
  flag: true,
  doc: '{"a":[1,2,{"b":null}]}',
  obj: { a: [1, 'two', null] },
  id: '6f1c7e2e-0b7a-4d1e-9a51-1f2d3c4b5a69',
  at: '2026-12-01T10:11:12.345678Z',
  date: new Date('2026-12-01T10:11:12.345Z'),
  untyped: 'plain',
};

describe.runIf(currentEngine().kind === 'pglite')('named prepared statements on the embedded engine', () => {
  let client: PGlite;
  let run: ReturnType<typeof pgliteStatements>;
  const preparedNames = async () =>
    (
      await client.query<{ name: string }>(
        "SELECT name FROM pg_prepared_statements WHERE name LIKE 'idem_test_pglite%' ORDER BY name",
      )
    ).rows.map((r) => r.name);

  beforeEach(async () => {
    client = new PGlite();
    await client.waitReady;
    await client.exec('CREATE TABLE t (k text PRIMARY KEY, v int NOT NULL)');
    run = pgliteStatements(client);
  });
  afterEach(async () => {
    if (!client.closed) await client.close();
  });

  it("answer what PGlite's query() answers, value for value and type for type", async () => {
    const viaQuery = (await client.query(SHAPES.text, bind(SHAPES, VALUES))).rows;
    const nulls = Object.fromEntries(Object.keys(VALUES).map((k) => [k, null]));
    const viaQueryNulls = (await client.query(SHAPES.text, bind(SHAPES, nulls))).rows;
    for (let i = 0; i < 3; i++) {
      expect(await run(SHAPES, VALUES)).toEqual(viaQuery);
      expect(await run(SHAPES, nulls)).toEqual(viaQueryNulls);
    }
    const [row] = viaQuery as Record<string, unknown>[];
    expect(row?.at).toBeInstanceOf(Date);
    expect(row?.obj).toEqual(VALUES.obj);
    expect(row?.text).toBe(VALUES.text);
  });

  it('prepare each statement once per engine, whichever runner runs it', async () => {
    expect(await preparedNames()).toEqual([]);
    await run(WRITE, { k: 'a', v: 1 });
    await run(READ, { k: 'a' });
    await run(READ, { k: 'b' });
    // A second runner on the same engine knows what the first prepared.
    expect(await pgliteStatements(client)(READ, { k: 'a' })).toEqual([{ v: 1 }]);
    expect(await preparedNames()).toEqual(['idem_test_pglite_read', 'idem_test_pglite_write']);
  });

  it('fail as query() does, and leave the session and the statement usable', async () => {
    const fromQuery = await client.query(FAILS.text, [0]).catch((e: unknown) => e);
    for (let i = 0; i < 2; i++) {
      const err = await run(FAILS, { d: 0 }).catch((e: unknown) => e);
      expect(err).toMatchObject({ code: '22012', message: (fromQuery as Error).message });
      expect(await run(FAILS, { d: 2 })).toEqual([{ q: 0 }]);
    }
    await run(WRITE, { k: 'a', v: 1 });
    await expect(run(WRITE, { k: 'a', v: 2 })).rejects.toMatchObject({ code: '23505' });
    expect(await run(READ, { k: 'a' })).toEqual([{ v: 1 }]);
    expect(client.isInTransaction()).toBe(false);
  });

  it('wait for a transaction someone else has open, and never run inside it', async () => {
    let inside!: () => void;
    const opened = new Promise<void>((resolve) => {
      inside = resolve;
    });
    let finish!: () => void;
    const held = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const tx = client.transaction(async (t) => {
      await t.query("INSERT INTO t (k, v) VALUES ('x', 1)");
      inside();
      await held;
      await t.rollback();
    });
    await opened;
    let answered = false;
    const read = run<{ v: number }>(READ, { k: 'x' }).then((rows) => {
      answered = true;
      return rows;
    });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(answered).toBe(false);
    finish();
    await tx;
    expect(await read).toEqual([]);
  });

  it('given a transaction, run inside it, and refuse once it is over; what it prepared stays', async () => {
    let inTx!: PgliteRun;
    await client.transaction(async (t) => {
      inTx = pgliteStatements(client, { transaction: t });
      expect(await inTx(WRITE, { k: 't', v: 1 })).toEqual([{ v: 1 }]);
      expect(await inTx(READ, { k: 't' })).toEqual([{ v: 1 }]);
      await t.rollback();
    });
    await expect(inTx(READ, { k: 't' })).rejects.toThrow(/Transaction is closed/);
    // Prepared inside the rolled-back transaction, and still there: no second Parse.
    expect(await preparedNames()).toEqual(['idem_test_pglite_read', 'idem_test_pglite_write']);
    expect(await run(READ, { k: 't' })).toEqual([]);
    expect(await run(WRITE, { k: 't', v: 2 })).toEqual([{ v: 2 }]);
    expect(client.isInTransaction()).toBe(false);
  });

  it('prepare again what someone else deallocated: at once, or inside a transaction on the next call', async () => {
    await run(WRITE, { k: 'a', v: 1 });
    expect(await run(READ, { k: 'a' })).toEqual([{ v: 1 }]);
    await client.exec('DEALLOCATE ALL');
    expect(await run(READ, { k: 'a' })).toEqual([{ v: 1 }]);
    await client.transaction(async (t) => {
      const inTx = pgliteStatements(client, { transaction: t });
      await t.exec('DEALLOCATE ALL');
      await expect(inTx(READ, { k: 'a' })).rejects.toMatchObject({ code: '26000' });
      await t.rollback();
    });
    expect(await run(READ, { k: 'a' })).toEqual([{ v: 1 }]);
    expect(await preparedNames()).toEqual(['idem_test_pglite_read']);
  });

  it('refuse to run once the engine is closed', async () => {
    await run(READ, { k: 'a' });
    await client.close();
    await expect(run(READ, { k: 'a' })).rejects.toThrow(/closed/);
  });
});
