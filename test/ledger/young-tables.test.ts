/**
 * A ledger analyzed while nearly empty (autovacuum's first analyze comes at
 * about 50 operations) plans every statement as a sequential scan, and each
 * session keeps those generic plans as the ledger grows. The sweeper analyzes
 * such a table again once it has grown (src/ledger/young-tables.ts), which
 * makes every session's plans again: here a session's kept plans are looked
 * at before the growth, after it, and after the sweeper's look.
 *
 * On Citus the coordinator's tables are empty shells (their rows live in the
 * workers' shards, and a worker plans each call afresh: docs/citus.md), so the
 * look finds nothing young there and analyzes nothing: the last block says so.
 */
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { postgresDatabase } from '../../src/db/database.js';
import { LEDGER_TABLES } from '../../src/ledger/sql/statistics.js';
import { Sweeper } from '../../src/ledger/sweeper.js';
import { tendYoungTables, YoungTables } from '../../src/ledger/young-tables.js';
import { createTestDatabase, type TestDatabase, withAdmin } from '../support/db.js';
import { currentEngine, onCitus, onPostgres } from '../support/engine.js';
import {
  expectKeyReads,
  insertCompleted,
  keyStatements,
  openSession,
  type PreparedPlan,
  preparePlan,
  type Session,
} from '../support/plans.js';

/** A ledger of `n` completed operations (and an event each), analyzed: autovacuum's first analyze. */
async function analyzedYoung(n: number): Promise<{ t: TestDatabase; s: Session }> {
  const t = await createTestDatabase();
  const s = await openSession(t);
  await s.query(insertCompleted('young', 1, n));
  for (const table of LEDGER_TABLES) await s.query(`ANALYZE ${table}`);
  return { t, s };
}

async function analyzedPages(s: Session): Promise<Record<string, number>> {
  const rows = await s.query(
    `SELECT relname, relpages FROM pg_class WHERE oid IN (to_regclass('idem_operations'), to_regclass('idem_events'))`,
  );
  return Object.fromEntries(rows.map((r) => [r.relname as string, r.relpages as number]));
}

describe.skipIf(onCitus())('a ledger analyzed nearly empty, then grown', () => {
  let t: TestDatabase;
  let s: Session;
  const plans: { name: string; index: string | null; plan: PreparedPlan }[] = [];
  /** The statements whose kept plan scanned a table at 50 operations. */
  let scanning: string[] = [];

  /** Which statements' kept plans read a ledger table by a sequential scan. */
  async function scanningNow(): Promise<string[]> {
    const out: string[] = [];
    for (const p of plans) {
      const reads = [...(await p.plan.reads('idem_operations')), ...(await p.plan.reads('idem_events'))];
      if (reads.includes('Seq Scan')) out.push(p.name);
    }
    return out;
  }

  beforeAll(async () => {
    ({ t, s } = await analyzedYoung(50));
    for (const [i, { name, st, index }] of keyStatements().entries())
      plans.push({ name, index, plan: await preparePlan(s.query, `young_${i}`, st.text, st.params.length) });
  });
  afterAll(async () => {
    await s?.close();
    await t?.drop();
  });

  it('the plans made at 50 operations scan the tables, and keep scanning them at 20,000', async () => {
    scanning = await scanningNow();
    // The adverse state: without it the rest of this file proves nothing.
    expect(scanning).toEqual(
      expect.arrayContaining(['read_by_key', 'begin_insert', 'complete', 'list_events']),
    );
    await s.query(insertCompleted('young', 51, 20_000));
    expect(await scanningNow()).toEqual(scanning);
  });

  it("the sweeper's look analyzes both tables, and every kept plan reads by its index again", async () => {
    const before = await analyzedPages(s);
    expect(await tendYoungTables(t.db)).toEqual({ analyzed: [...LEDGER_TABLES], notOwned: [] });
    const after = await analyzedPages(s);
    for (const table of LEDGER_TABLES) expect(after[table]).toBeGreaterThan(before[table]! * 10);
    for (const { name, index, plan } of plans) {
      expectKeyReads(await plan.reads('idem_operations'), name, index, 'analyzed at 50, grown, looked at');
      expect(await plan.reads('idem_events'), name).not.toContain('Seq Scan');
    }
  });

  it('a table grown past young is not analyzed again', async () => {
    expect(await tendYoungTables(t.db)).toEqual({ analyzed: [], notOwned: [] });
  });
});

describe.skipIf(onCitus())('what is not young is left alone', () => {
  it('a ledger never analyzed (planned as ten pages at least), or analyzed and not grown', async () => {
    const t = await createTestDatabase();
    const s = await openSession(t);
    try {
      await s.query(insertCompleted('young', 1, 2000));
      expect(await tendYoungTables(t.db)).toEqual({ analyzed: [], notOwned: [] });
      for (const table of LEDGER_TABLES) await s.query(`ANALYZE ${table}`);
      await s.query(`DELETE FROM idem_events`);
      await s.query(`DELETE FROM idem_operations`);
      for (const table of LEDGER_TABLES) await s.query(`ANALYZE ${table}`);
      // Analyzed with nothing in it, but as long as it was: it has not grown since.
      expect(await tendYoungTables(t.db)).toEqual({ analyzed: [], notOwned: [] });
    } finally {
      await s.close();
      await t.drop();
    }
  });
});

describe.skipIf(onCitus())('the sweeper looks with its passes', () => {
  it('a running sweeper analyzes a young ledger that has grown', async () => {
    const { t, s } = await analyzedYoung(50);
    const sweeper = new Sweeper(t.db, { ...loadConfig({}).sweep, intervalMs: 50 }, pino({ level: 'silent' }));
    try {
      const before = await analyzedPages(s);
      await s.query(insertCompleted('young', 51, 3000));
      sweeper.start();
      await vi.waitFor(
        async () => {
          const now = await analyzedPages(s);
          for (const table of LEDGER_TABLES) expect(now[table]).toBeGreaterThan(before[table]!);
        },
        { timeout: 10_000, interval: 100 },
      );
    } finally {
      await sweeper.stop();
      await s.close();
      await t.drop();
    }
  });

  it("does not look after a failed pass: an outage is one warning, the sweep's", async () => {
    const t = await createTestDatabase();
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    const down = async () => {
      throw new Error('connection refused');
    };
    const sweeper = new Sweeper(
      { ...t.db, run: down, rows: down },
      { ...loadConfig({}).sweep, intervalMs: 50 },
      log,
    );
    try {
      sweeper.start();
      await vi.waitFor(() => expect(lines.length).toBeGreaterThan(0), { timeout: 5000, interval: 20 });
    } finally {
      await sweeper.stop(); // waits for the pass under way, and what follows it
      await t.drop();
    }
    expect(lines.map((l) => l.msg)).toEqual([expect.stringContaining('sweep failed')]);
  });

  it('looks at most once a second, logs what it analyzed, and a failed look is logged once', async () => {
    const { t, s } = await analyzedYoung(50);
    const lines: Record<string, unknown>[] = [];
    const log = pino({ level: 'info' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    let clock = 0;
    const young = new YoungTables(log, () => clock);
    try {
      await s.query(insertCompleted('young', 51, 3000));
      const failing = {
        ...t.db,
        rows: async () => {
          throw new Error('connection refused');
        },
      };
      await young.tend(failing);
      clock += 1000;
      await young.tend(failing);
      expect(lines.filter((l) => l.level === 40)).toHaveLength(1);
      clock += 500;
      await young.tend(t.db); // not due: half a second after the last look
      expect((await analyzedPages(s)).idem_operations).toBeLessThan(8);
      clock += 500;
      await young.tend(t.db);
      expect(lines.map((l) => l.msg)).toEqual([
        expect.stringContaining('young-table check failed'),
        'young-table check recovered',
        expect.stringContaining('analyzed young ledger tables'),
      ]);
      expect(lines[2]!.tables).toEqual([...LEDGER_TABLES]);
    } finally {
      await s.close();
      await t.drop();
    }
  });
});

// Not on Citus, where not even the owner's look analyzes anything (the last block).
describe.skipIf(!onPostgres() || onCitus())('a role that does not own the tables', () => {
  const role = `idem_young_${randomBytes(4).toString('hex')}`;
  async function admin(text: string): Promise<void> {
    const engine = currentEngine();
    if (engine.kind !== 'postgres') throw new Error('Postgres only');
    await withAdmin(engine.url, (c) => c.query(text));
  }
  beforeAll(() => admin(`CREATE ROLE "${role}" LOGIN`));
  afterAll(() => admin(`DROP ROLE IF EXISTS "${role}"`));

  it('is told which tables it may not analyze, and analyzes none; the owner then does', async () => {
    const { t, s } = await analyzedYoung(50);
    const url = new URL(t.url!);
    url.username = role;
    const other = postgresDatabase(url.toString(), loadConfig({}).db);
    try {
      await s.query(insertCompleted('young', 51, 3000));
      const before = await analyzedPages(s);
      expect(await tendYoungTables(other)).toEqual({ analyzed: [], notOwned: [...LEDGER_TABLES] });
      expect(await analyzedPages(s)).toEqual(before);
      expect(await tendYoungTables(t.db)).toEqual({ analyzed: [...LEDGER_TABLES], notOwned: [] });
      const after = await analyzedPages(s);
      for (const table of LEDGER_TABLES) expect(after[table]).toBeGreaterThan(before[table]!);
    } finally {
      await other.close();
      await s.close();
      await t.drop();
    }
  });
});

describe.runIf(onCitus())('on Citus', () => {
  it("reads the coordinator's empty shells, so a ledger analyzed nearly empty and grown is not young", async () => {
    const { t, s } = await analyzedYoung(50);
    try {
      await s.query(insertCompleted('young', 51, 3000));
      const [sizes] = await s.query(
        `SELECT pg_relation_size('idem_operations') AS shell, citus_relation_size('idem_operations') AS shards`,
      );
      expect(Number(sizes!.shell)).toBe(0);
      expect(Number(sizes!.shards)).toBeGreaterThan(0);
      expect(await tendYoungTables(t.db)).toEqual({ analyzed: [], notOwned: [] });
    } finally {
      await s.close();
      await t.drop();
    }
  });
});
