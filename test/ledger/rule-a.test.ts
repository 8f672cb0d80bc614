/**
 * Rule A (contract section 1) for every effect class, dispatched and not, and
 * the approval deadline: what reads and begin show after expiry BEFORE any
 * sweeper ran, and that a sweeper pass changes no read (lapses are dated at
 * the lease expiry or deadline, see src/ledger/sql/view.ts) and writes each
 * lapse's event exactly once.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operation } from '../../src/contract/index.js';
import type { Database } from '../../src/db/database.js';
import { EVENT_ORDER } from '../../src/ledger/sql/events.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { client, expireApproval, expireLease, type Reply, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const SWEEP = { enabled: true, intervalMs: 1000, batchSize: 500, purgeBatchSize: 500 };

type Effect = 'read' | 'idempotent_write' | 'non_idempotent_write' | 'unclassified';
const EFFECTS: Effect[] = ['read', 'idempotent_write', 'non_idempotent_write', 'unclassified'];

interface Case {
  name: string;
  effect: Effect;
  dispatched: boolean;
  /** What every read shows once the lease expired. */
  reads: 'ready' | 'in_progress' | 'outcome_unknown';
  /** What the next begin answers. */
  begin: 'acquired' | 'recovered' | 'OUTCOME_UNKNOWN';
  /** Whether the lapse is a state change someone must write (its event once). */
  lapses: boolean;
}

const CASES: Case[] = EFFECTS.flatMap((effect): Case[] => {
  const safe = effect === 'read' || effect === 'idempotent_write';
  return [
    {
      name: `${effect}, never dispatched`,
      effect,
      dispatched: false,
      reads: 'ready',
      begin: 'acquired',
      lapses: true,
    },
    {
      name: `${effect}, dispatched`,
      effect,
      dispatched: true,
      reads: safe ? 'in_progress' : 'outcome_unknown',
      begin: safe ? 'recovered' : 'OUTCOME_UNKNOWN',
      lapses: !safe,
    },
  ];
});

type Api = ReturnType<typeof client>;

async function eventsOf(
  db: Database,
  key: string,
): Promise<{ type: string; detail: Record<string, unknown>; actor: string }[]> {
  return db.rows(
    sql`SELECT type, detail, actor FROM idem_events WHERE scope = 'orders' AND key = ${key} ORDER BY ${sql.raw(EVENT_ORDER)}`,
  );
}

async function storedStatus(db: Database, key: string): Promise<string> {
  const rows = await db.rows<{ status: string }>(
    sql`SELECT status FROM idem_operations WHERE scope = 'orders' AND key = ${key}`,
  );
  return rows[0]!.status;
}

async function startCase(api: Api, db: Database, c: Case, key: string): Promise<Reply> {
  const r = await api.begin({ key, request: { key }, effect: c.effect, dispatch: c.dispatched });
  expect(r.status, r.raw).toBe(201);
  await expireLease(db, 'orders', key);
  return r;
}

/** GET by key and by id; both must say the same thing. */
async function readBoth(api: Api, key: string, id: string): Promise<{ byKey: Reply; byId: Reply }> {
  const byKey = await api.get(key);
  const byId = await api.getById(id);
  expect(byKey.status, byKey.raw).toBe(200);
  expect(byId.status, byId.raw).toBe(200);
  expect(byId.raw).toBe(byKey.raw);
  return { byKey, byId };
}

function expectRead(op: Operation, c: Case, begun: Reply): void {
  expect(op.status).toBe(c.reads);
  expect(op.attempt).toBe(1);
  expect(op.effect).toBe(c.effect);
  if (c.reads === 'ready') {
    // Nobody holds it: no lease to show, and it may be purged after retention.
    expect(op.lease).toBeNull();
    expect(op.retainedUntil).not.toBeNull();
  } else {
    expect(op.lease).not.toBeNull();
    expect(Date.parse(op.lease!.expiresAt)).toBeLessThan(Date.parse(begun.body.lease.expiresAt));
    expect(op.lease!.dispatchedAt).not.toBeNull();
  }
  expect(op.completedAt).toBeNull();
  expect(op.result).toBeNull();
}

function expectBegin(r: Reply, c: Case, before: Operation): void {
  if (c.begin === 'OUTCOME_UNKNOWN') {
    expect(r.status, r.raw).toBe(409);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.body).toMatchObject({ code: 'OUTCOME_UNKNOWN', retryable: false });
    // The state begin shows is exactly what reads showed, written or not.
    expect(r.body.operation).toEqual(before);
    return;
  }
  expect(r.status, r.raw).toBe(200);
  expect(r.body).toMatchObject({ outcome: 'acquired', lease: { attempt: 2 } });
  expect(r.body.operation).toMatchObject({ status: 'in_progress', attempt: 2 });
  if (c.begin === 'recovered') expect(r.body.recovered).toBe(true);
  else expect(r.body.recovered).toBeUndefined();
}

describe('rule A before any sweeper ran', () => {
  let t: TestApp;
  let api: Api;
  beforeAll(async () => {
    t = await createTestApp();
    api = client(t.app);
  });
  afterAll(() => t.close());

  for (const c of CASES) {
    it(`${c.name}: reads ${c.reads}, begin answers ${c.begin}`, async () => {
      const key = `rule-a/${randomUUID()}`;
      const begun = await startCase(api, t.db, c, key);
      const { byKey } = await readBoth(api, key, begun.body.operation.id);
      const op = byKey.body.operation;
      expectRead(op, c, begun);
      // Only read so far: nothing was written, and reading again reads the same.
      expect(await storedStatus(t.db, key)).toBe('in_progress');
      expect((await eventsOf(t.db, key)).map((e) => e.type)).toEqual(['created']);
      expect((await api.get(key)).raw).toBe(byKey.raw);
      expect((await api.events(key)).body.events.map((e: { type: string }) => e.type)).toEqual(['created']);

      // The holder's live-lease calls see the expiry too.
      const hb = await api.heartbeat(key, begun.body.lease.id, 30_000);
      expect(hb.status).toBe(409);
      expect(hb.body.code).toBe('LEASE_LOST');

      const b = await api.begin({ key, request: { key } });
      expectBegin(b, c, op);
      const types = (await eventsOf(t.db, key)).map((e) => e.type);
      if (c.begin === 'OUTCOME_UNKNOWN') {
        // begin wrote the lapse it applied: once, and asking again adds nothing.
        expect(types).toEqual(['created', 'lease_expired']);
        expect(await storedStatus(t.db, key)).toBe('outcome_unknown');
        const again = await api.begin({ key, request: { key } });
        expect(again.body.code).toBe('OUTCOME_UNKNOWN');
        expect((await eventsOf(t.db, key)).map((e) => e.type)).toEqual(types);
        expect((await api.get(key)).raw).toBe(byKey.raw);
      } else {
        expect(types.filter((e) => e === 'acquired')).toHaveLength(1);
        expect(types.filter((e) => e === 'lease_expired').length).toBeLessThanOrEqual(1);
      }
    });
  }

  it('an approval deadline: pending_approval reads as rejected (approval expired); begin replays it', async () => {
    const key = `approval/${randomUUID()}`;
    const a = await api.begin({ key, request: { key }, requireApproval: true, approvalTimeoutMs: 60_000 });
    expect(a.status, a.raw).toBe(202);
    expect(a.body.operation.approval.state).toBe('pending');
    await expireApproval(t.db, 'orders', key);
    const { byKey } = await readBoth(api, key, a.body.operation.id);
    const op = byKey.body.operation;
    expect(op.status).toBe('rejected');
    expect(op.approval.state).toBe('expired');
    expect(op.completedAt).not.toBeNull();
    expect(op.lease).toBeNull();
    expect(await storedStatus(t.db, key)).toBe('pending_approval');
    expect((await eventsOf(t.db, key)).map((e) => e.type)).toEqual(['created']);

    const b = await api.begin({ key, request: { key } });
    expect(b.status, b.raw).toBe(200);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.body.outcome).toBe('replayed');
    expect(b.body.lease).toBeUndefined();
    expect(b.body.operation).toEqual(op);
    expect((await eventsOf(t.db, key)).map((e) => e.type)).toEqual(['created', 'approval_expired']);
    const again = await api.begin({ key, request: { key } });
    expect(again.raw).toBe(b.raw);
    expect((await eventsOf(t.db, key)).map((e) => e.type)).toEqual(['created', 'approval_expired']);
    expect((await api.get(key)).raw).toBe(byKey.raw);
  });

  it('a live lease and an approval before its deadline read as they are', async () => {
    const live = `live/${randomUUID()}`;
    const a = await api.begin({ key: live, request: {}, effect: 'non_idempotent_write' });
    expect((await api.get(live)).body.operation).toEqual(a.body.operation);
    const pending = `pending/${randomUUID()}`;
    const p = await api.begin({ key: pending, request: {}, requireApproval: true });
    expect((await api.get(pending)).body.operation).toEqual(p.body.operation);
    expect((await api.get(pending)).body.operation.status).toBe('pending_approval');
  });
});

describe('one sweeper pass', () => {
  let t: TestApp;
  let api: Api;
  interface Seeded {
    c: Case | 'approval' | 'live' | 'pending' | 'succeeded';
    key: string;
    id: string;
    byKey: string;
    byId: string;
    op: Operation;
    events: string[];
  }
  const seeded: Seeded[] = [];

  beforeAll(async () => {
    // A database of its own: the pass's counts are exactly this fixture's.
    t = await createTestApp();
    api = client(t.app);
    // Filled in by the reads below, once everything is in place.
    const seed = (c: Seeded['c'], key: string, r: Reply) =>
      seeded.push({ c, key, id: r.body.operation.id, byKey: '', byId: '', op: {} as Operation, events: [] });
    for (const c of CASES) {
      const key = `sweep/${c.name}/${randomUUID()}`;
      seed(c, key, await startCase(api, t.db, c, key));
    }
    const approval = `sweep/approval/${randomUUID()}`;
    seed('approval', approval, await api.begin({ key: approval, request: {}, requireApproval: true }));
    await expireApproval(t.db, 'orders', approval);
    // Controls the sweeper must leave alone.
    const live = `sweep/live/${randomUUID()}`;
    seed('live', live, await api.begin({ key: live, request: {}, effect: 'unclassified' }));
    const pending = `sweep/pending/${randomUUID()}`;
    seed('pending', pending, await api.begin({ key: pending, request: {}, requireApproval: true }));
    const done = `sweep/succeeded/${randomUUID()}`;
    const dn = await api.begin({ key: done, request: {} });
    await api.complete(done, dn.body.lease.id, 'succeeded', { ok: true });
    seed('succeeded', done, dn);

    for (const s of seeded) {
      const { byKey, byId } = await readBoth(api, s.key, s.id);
      s.byKey = byKey.raw;
      s.byId = byId.raw;
      s.op = byKey.body.operation;
      s.events = (await eventsOf(t.db, s.key)).map((e) => e.type);
    }
  });
  afterAll(() => t.close());

  const lapsing = () => seeded.filter((s) => (typeof s.c === 'object' ? s.c.lapses : s.c === 'approval'));

  it('before the pass, every read already applied rule A and the deadline', () => {
    for (const s of seeded) {
      if (typeof s.c === 'object') expect(s.op.status, s.c.name).toBe(s.c.reads);
    }
    const approval = seeded.find((s) => s.c === 'approval')!;
    expect(approval.op).toMatchObject({ status: 'rejected', approval: { state: 'expired' } });
    expect(seeded.find((s) => s.c === 'live')!.op.status).toBe('in_progress');
    expect(seeded.find((s) => s.c === 'pending')!.op.status).toBe('pending_approval');
  });

  it('writes each due lapse once; reads are byte-identical before and after; a second pass does nothing', async () => {
    const rowsBefore = await snapshot(t.db);
    const result = await sweepOnce(t.db, SWEEP);
    // 4 never-dispatched leases (ready) + 2 dispatched non-idempotent (outcome_unknown).
    expect(result).toEqual({ leaseExpired: 6, approvalExpired: 1, purged: 0 });

    for (const s of seeded) {
      const label = typeof s.c === 'object' ? s.c.name : s.c;
      const { byKey, byId } = await readBoth(api, s.key, s.id);
      expect(byKey.raw, label).toBe(s.byKey);
      expect(byId.raw, label).toBe(s.byId);
      const events = await eventsOf(t.db, s.key);
      const added = events.slice(s.events.length);
      if (lapsing().includes(s)) {
        const type = s.c === 'approval' ? 'approval_expired' : 'lease_expired';
        expect(
          added.map((e) => e.type),
          label,
        ).toEqual([type]);
        expect(added[0]!.detail.status, label).toBe(s.op.status);
        // The lapse is now stored, not only read.
        const stored = rowsBefore.find((r) => r.key === s.key)!;
        expect(stored.status, label).not.toBe(s.op.status);
        expect(await storedStatus(t.db, s.key), label).toBe(s.op.status);
      } else {
        expect(added, label).toEqual([]);
      }
    }
    // Rows the pass had no business with are byte-for-byte unchanged.
    const untouched = seeded.filter((s) => !lapsing().includes(s)).map((s) => s.key);
    const rowsAfter = await snapshot(t.db);
    expect(rowsAfter.filter((r) => untouched.includes(r.key as string))).toEqual(
      rowsBefore.filter((r) => untouched.includes(r.key as string)),
    );

    const eventsBefore = await t.db.rows(sql`SELECT * FROM idem_events ORDER BY key, version, at`);
    expect(await sweepOnce(t.db, SWEEP)).toEqual({ leaseExpired: 0, approvalExpired: 0, purged: 0 });
    expect(await t.db.rows(sql`SELECT * FROM idem_events ORDER BY key, version, at`)).toEqual(eventsBefore);
    expect(await snapshot(t.db)).toEqual(rowsAfter);
  });

  it('after the pass, begin answers exactly what it answers without one, and writes no second lapse', async () => {
    for (const s of seeded) {
      if (typeof s.c !== 'object') continue;
      const c = s.c;
      const before = (await eventsOf(t.db, s.key)).map((e) => e.type);
      const b = await api.begin({ key: s.key, request: { key: s.key } });
      expectBegin(b, c, s.op);
      const after = (await eventsOf(t.db, s.key)).map((e) => e.type);
      expect(after.filter((e) => e === 'lease_expired').length, c.name).toBe(c.lapses ? 1 : 0);
      expect(after.slice(before.length), c.name).toEqual(c.begin === 'OUTCOME_UNKNOWN' ? [] : ['acquired']);
    }
    const approval = seeded.find((s) => s.c === 'approval')!;
    const r = await api.begin({ key: approval.key, request: {} });
    expect(r.status).toBe(200);
    expect(r.body.outcome).toBe('replayed');
    expect(r.body.operation).toEqual(approval.op);
    expect((await eventsOf(t.db, approval.key)).map((e) => e.type)).toEqual(['created', 'approval_expired']);
  });
});

describe('sweepers racing', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('three passes at once (replicas) write each due lapse exactly once', async () => {
    const api = client(t.app);
    const keys: string[] = [];
    // The embedded engine runs the passes one statement at a time anyway: fewer rows there.
    const N = t.db.kind === 'postgres' ? 120 : 30;
    for (let i = 0; i < N; i++) {
      const key = `race/${i}/${randomUUID()}`;
      keys.push(key);
      const r = await api.begin({
        key,
        request: { i },
        effect: i % 2 ? 'non_idempotent_write' : 'read',
        dispatch: i % 3 !== 0,
        ...(i % 5 === 0 ? { requireApproval: true } : {}),
      });
      expect(r.status).toBeLessThan(300);
    }
    // The database's time, read once as a value: Citus refuses now() inside CASE in an UPDATE.
    const past = (
      await t.db.rows<{ past: string }>(sql`SELECT (now() - interval '1 second')::text AS past`)
    )[0]!.past;
    await t.db.rows(sql`UPDATE idem_operations SET
      lease_expires_at = CASE WHEN status = 'in_progress' THEN ${past}::timestamptz END,
      approval_deadline = CASE WHEN status = 'pending_approval' THEN ${past}::timestamptz END`);
    const reads = new Map<string, string>();
    for (const key of keys) reads.set(key, (await api.get(key)).raw);

    // On Postgres each pass gets its own pool, like separate replicas.
    const pools = t.db.kind === 'postgres' ? [t.testDb.openAnother(), t.testDb.openAnother()] : [];
    const dbs = [t.db, ...pools, ...(pools.length ? [] : [t.db, t.db])];
    const results = await Promise.all(dbs.map((db, i) => sweepOnce(db, SWEEP, `sweeper-${i}`)));
    const total = results.reduce((n, r) => n + r.leaseExpired + r.approvalExpired, 0);

    const due = await t.db.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM idem_events WHERE type IN ('lease_expired', 'approval_expired')`,
    );
    expect(total).toBe(due[0]!.n);
    const perKey = await t.db.rows<{ key: string; n: number }>(
      sql`SELECT key, count(*)::int AS n FROM idem_events
          WHERE type IN ('lease_expired', 'approval_expired') GROUP BY key HAVING count(*) > 1`,
    );
    expect(perKey).toEqual([]);
    // Exactly the rows that lapse: approvals, never-dispatched, dispatched non-idempotent.
    const expected = keys.filter((_, i) => i % 5 === 0 || i % 3 === 0 || i % 2 === 1).length;
    expect(total).toBe(expected);
    for (const key of keys) expect((await api.get(key)).raw).toBe(reads.get(key));
  });
});
