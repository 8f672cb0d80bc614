/**
 * `PgLedger.once` (docs/downstream.md, section 2), on a real database: one
 * transaction holds the operation and the service's own write; a throw
 * leaves neither; a concurrent duplicate waits on the unique key (Postgres
 * only: PGlite runs one transaction at a time, so nothing can overlap).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../src/auth/keys.js';
import { LEASE_MS } from '../../src/contract/index.js';
import { IdemError } from '../../src/errors.js';
import { buildApp } from '../../src/http/app.js';
import { begin } from '../../src/ledger/begin.js';
import { markUnknown } from '../../src/ledger/holder.js';
import type { TxClient } from '../../src/pg/index.js';
import { onCitus, onPostgres } from '../support/engine.js';
import { NOTES_TABLE, type PgLedgerFixture, pgLedgerFixture } from './support.js';

let f: PgLedgerFixture;
beforeAll(async () => {
  f = await pgLedgerFixture();
  await f.ledger.migrate(); // already migrated: applying again is a no-op
  await f.query(NOTES_TABLE);
});
afterAll(() => f.close());

const key = () => `note-${randomUUID()}`;
const SCOPE = 'notes';
const input = { folderId: 'drafts', text: 'check the deploy config' };

async function saveNote(tx: TxClient, folderId: string, text: string) {
  const { rows } = await tx.query<{ id: string }>(
    'INSERT INTO notes (folder_id, text) VALUES ($1, $2) RETURNING id::text',
    [folderId, text],
  );
  return { noteId: rows[0]!.id, folderId, text };
}
const notesWith = async (text: string) =>
  (await f.query<{ n: number }>('SELECT count(*)::int AS n FROM notes WHERE text = $1', [text]))[0]!.n;
const opCount = async (k: string) =>
  (await f.query<{ n: number }>('SELECT count(*)::int AS n FROM idem_operations WHERE key = $1', [k]))[0]!.n;

function refusal(err: unknown): string {
  return err instanceof IdemError ? err.code : `not an IdemError: ${String(err)}`;
}

describe('PgLedger.once', () => {
  it('runs once, then replays the stored result; one note, one succeeded operation with its events', async () => {
    const k = key();
    const text = `note ${k}`;
    let runs = 0;
    const run = () =>
      f.ledger.once({ scope: SCOPE, key: k, request: { ...input, text } }, async (tx) => {
        runs++;
        return saveNote(tx, input.folderId, text);
      });
    const first = await run();
    expect(first.outcome).toBe('executed');
    expect(first.operation).toMatchObject({ scope: SCOPE, key: k, status: 'succeeded', attempt: 1 });
    const again = await run();
    expect(again).toEqual({ ...first, outcome: 'replayed' });
    expect(runs).toBe(1);
    expect(await notesWith(text)).toBe(1);
    const events = await f.query<{ type: string; actor: string }>(
      'SELECT type, actor FROM idem_events WHERE operation_id = $1 ORDER BY at',
      [first.operation.id],
    );
    expect(events).toEqual([
      { type: 'created', actor: 'note-service' },
      { type: 'completed', actor: 'note-service' },
    ]);
  });

  it('a throw before the commit leaves neither the note nor the operation; the next attempt runs cleanly', async () => {
    const k = key();
    const text = `rolled back ${k}`;
    const boom = new Error('the service failed after its write');
    await expect(
      f.ledger.once({ scope: SCOPE, key: k, request: { text } }, async (tx) => {
        await saveNote(tx, 'drafts', text);
        throw boom;
      }),
    ).rejects.toBe(boom);
    expect(await notesWith(text)).toBe(0);
    expect(await opCount(k)).toBe(0);
    const next = await f.ledger.once({ scope: SCOPE, key: k, request: { text } }, (tx) =>
      saveNote(tx, 'drafts', text),
    );
    expect(next.outcome).toBe('executed');
    expect(await notesWith(text)).toBe(1);
  });

  it('the same key with other arguments is KEY_REUSED, nothing runs, and the original still replays', async () => {
    const k = key();
    const text = `original ${k}`;
    const first = await f.ledger.once({ scope: SCOPE, key: k, request: { text } }, (tx) =>
      saveNote(tx, 'a', text),
    );
    let ran = false;
    const other = f.ledger.once({ scope: SCOPE, key: k, request: { text: 'another' } }, async () => {
      ran = true;
    });
    await expect(other.catch(refusal)).resolves.toBe('KEY_REUSED');
    expect(ran).toBe(false);
    const again = await f.ledger.once({ scope: SCOPE, key: k, request: { text } }, (tx) =>
      saveNote(tx, 'a', text),
    );
    expect(again.result).toEqual(first.result);
    expect(await notesWith(text)).toBe(1);
  });

  it('the transaction handle is dead once once() returns: no write can land outside it', async () => {
    let kept: TxClient | undefined;
    await f.ledger.once({ scope: SCOPE, key: key(), request: 1 }, async (tx) => {
      kept = tx;
    });
    await expect(kept!.query("INSERT INTO notes (folder_id, text) VALUES ('x', 'late')")).rejects.toThrow(
      'this transaction is over',
    );
    expect(await notesWith('late')).toBe(0);
  });

  it('keys reordered in the request are the same request (RFC 8785)', async () => {
    const k = key();
    const a = await f.ledger.once({ scope: SCOPE, key: k, request: { x: 1, y: 2 } }, async () => ({ ok: 1 }));
    const b = await f.ledger.once({ scope: SCOPE, key: k, request: { y: 2, x: 1 } }, async () => ({ ok: 2 }));
    expect([a.outcome, b.outcome]).toEqual(['executed', 'replayed']);
    expect(b.result).toEqual({ ok: 1 });
  });

  it('held by a live lease of the HTTP service: OPERATION_IN_PROGRESS with a wait, and the holder is untouched', async () => {
    const k = key();
    await begin(f.testDb.db, SCOPE, { key: k, request: { text: 'x' }, leaseMs: LEASE_MS.default }, 'service');
    const err = await f.ledger
      .once({ scope: SCOPE, key: k, request: { text: 'x' } }, async () => 1)
      .catch((e) => e);
    expect(refusal(err)).toBe('OPERATION_IN_PROGRESS');
    expect((err as IdemError).retryAfter).toBeGreaterThan(0);
    expect((await f.ledger.get(SCOPE, k))?.status).toBe('in_progress');
  });

  it('pending approval and outcome_unknown get the same answers as begin', async () => {
    const pending = key();
    await begin(f.testDb.db, SCOPE, { key: pending, request: 1, requireApproval: true }, 'service');
    const p = await f.ledger.once({ scope: SCOPE, key: pending, request: 1 }, async () => 1).catch((e) => e);
    expect(refusal(p)).toBe('OPERATION_IN_PROGRESS');
    expect((await f.ledger.get(SCOPE, pending))?.status).toBe('pending_approval');

    const lost = key();
    const b = await begin(
      f.testDb.db,
      SCOPE,
      { key: lost, request: 2, effect: 'non_idempotent_write' },
      'service',
    );
    await markUnknown(f.testDb.db, { scope: SCOPE, key: lost, leaseId: b.body.lease!.id, actor: 'service' });
    let ran = false;
    const u = await f.ledger
      .once({ scope: SCOPE, key: lost, request: 2 }, async () => {
        ran = true;
      })
      .catch((e) => e);
    expect(refusal(u)).toBe('OUTCOME_UNKNOWN');
    expect(ran).toBe(false);
  });

  it('a serialization failure rolls the whole transaction back and runs it again: one note', async () => {
    const k = key();
    const text = `retried ${k}`;
    let runs = 0;
    const out = await f.ledger.once({ scope: SCOPE, key: k, request: { text } }, async (tx) => {
      runs++;
      const note = await saveNote(tx, 'drafts', text);
      // A real SQLSTATE 40001 raised by the database, as SERIALIZABLE or CockroachDB would.
      if (runs === 1)
        await tx.query(`DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'serialization_failure'; END $$`);
      return note;
    });
    expect(runs).toBe(2);
    expect(out.outcome).toBe('executed');
    expect(await notesWith(text)).toBe(1);
  });

  it("the rows are ordinary operations: the ledger service's API shows them", async () => {
    const k = key();
    const done = await f.ledger.once({ scope: SCOPE, key: k, request: { text: k } }, async () => ({
      noteId: '7',
    }));
    const app = await buildApp({ db: f.testDb.db, keys: new KeyStore([]), logger: false });
    try {
      const r = await app.inject({ method: 'GET', url: `/v1/scopes/${SCOPE}/operations/${k}` });
      expect(r.statusCode).toBe(200);
      expect(r.json().operation).toMatchObject({
        id: done.operation.id,
        status: 'succeeded',
        result: { noteId: '7' },
      });
    } finally {
      await app.close();
    }
  });
});

describe('PgLedger.once, two at once (Postgres: the second waits on the unique key)', () => {
  /**
   * Resolves once a backend of this database waits for a lock (the duplicate's INSERT).
   * On Citus the wait happens on a worker, seen in citus_stat_activity as a query on this
   * file's schema (the test files share one database there).
   */
  async function someoneWaitsOnALock(): Promise<void> {
    const waiting = onCitus()
      ? `SELECT count(*)::int AS n FROM citus_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE '%' || current_schema() || '.idem_%'`
      : `SELECT count(*)::int AS n FROM pg_stat_activity
         WHERE datname = current_database() AND wait_event_type = 'Lock'`;
    for (let i = 0; i < 400; i++) {
      const rows = await f.query<{ n: number }>(waiting);
      if ((rows[0]?.n ?? 0) > 0) return;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error('the duplicate never waited on the lock');
  }

  it('the duplicate waits for the first to commit, then replays its result: one note', async ({ skip }) => {
    if (!onPostgres()) skip('PGlite runs one transaction at a time: no overlap to test');
    const k = key();
    const text = `raced ${k}`;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let runs = 0;
    const body = async (tx: TxClient) => {
      runs++;
      const note = await saveNote(tx, 'drafts', text);
      await gate;
      return note;
    };
    const first = f.ledger.once({ scope: SCOPE, key: k, request: { text } }, body);
    const second = f.another().once({ scope: SCOPE, key: k, request: { text } }, body);
    await someoneWaitsOnALock();
    expect(runs).toBe(1);
    release();
    const [a, b] = await Promise.all([first, second]);
    expect([a.outcome, b.outcome].sort()).toEqual(['executed', 'replayed']);
    expect(a.result).toEqual(b.result);
    expect(runs).toBe(1);
    expect(await notesWith(text)).toBe(1);
  });

  it('when the first rolls back, the waiting duplicate runs: one note', async ({ skip }) => {
    if (!onPostgres()) skip('PGlite runs one transaction at a time: no overlap to test');
    const k = key();
    const text = `first failed ${k}`;
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const first = f.ledger.once({ scope: SCOPE, key: k, request: { text } }, async (tx) => {
      await saveNote(tx, 'drafts', text);
      await gate;
      throw new Error('crashed before commit');
    });
    const second = f
      .another()
      .once({ scope: SCOPE, key: k, request: { text } }, (tx) => saveNote(tx, 'drafts', text));
    await someoneWaitsOnALock();
    release();
    await expect(first).rejects.toThrow('crashed before commit');
    expect((await second).outcome).toBe('executed');
    expect(await notesWith(text)).toBe(1);
  });
});
