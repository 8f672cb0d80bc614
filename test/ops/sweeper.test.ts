/**
 * The sweeper and retention (contract sections 1 and 6; drill F9): every lapse
 * written exactly once however many sweepers run, dispatched idempotent work
 * left for the next begin, and purge deleting exactly the terminal and `ready`
 * records past `retainedUntil`, with their events, and nothing else.
 */
import { randomUUID } from 'node:crypto';
import { type SQL, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { Database } from '../../src/db/database.js';
import { EVENT_ORDER } from '../../src/ledger/sql/events.js';
import { renderedStatements } from '../../src/ledger/sql/rendered.js';
import { LeaseScanFloor, type SweepResult, sweepOnce } from '../../src/ledger/sweeper.js';
import { onCitus, onPostgres } from '../support/engine.js';
import { client, expireApproval, expireLease, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

type Api = ReturnType<typeof client>;
const EFFECTS = ['read', 'idempotent_write', 'non_idempotent_write', 'unclassified'] as const;
const settings = loadConfig({}).sweep;

let t: TestApp;
beforeAll(async () => {
  t = await createTestApp();
}, SETUP_MS);
afterAll(() => t.close());

const inList = (ids: string[]): SQL =>
  sql.join(
    ids.map((id) => sql`${id}::uuid`),
    sql`, `,
  );

/**
 * The sweeper's lapse batch as one SQL text, its parameters written in by name
 * (500 rows, actor `test`, leases from `afterUs` on or from the oldest).
 */
function lapseBatchText(afterUs: string | null = null): string {
  const lapse = renderedStatements().find((s) => s.name === 'lapse_batch')!;
  const values: Record<string, string> = {
    limit: '500',
    actor: `'test'`,
    afterUs: afterUs === null ? 'NULL' : `'${afterUs}'`,
  };
  expect(lapse.params.slice().sort()).toEqual(Object.keys(values).sort());
  return lapse.text.replace(/\$(\d+)::/g, (_, n: string) => `${values[lapse.params[Number(n) - 1]!]}::`);
}

/**
 * `n` copies of each operation row `which` selects (as `o`), in one statement:
 * copy `g` gets the key `<key>/<g>`, a new id, and the columns `set` gives
 * (`jsonb_build_object` arguments over `o` and `g`). Copies have no events.
 */
const cloneRows = (db: Database, which: SQL, n: number, set: SQL) =>
  db.rows(sql`INSERT INTO idem_operations
    SELECT (jsonb_populate_record(o, jsonb_build_object('key', o.key || '/' || g, 'id', gen_random_uuid(), ${set}))).*
    FROM idem_operations o, generate_series(1, ${n}::int) g WHERE ${which}`);

/** Events per operation id, by type. */
async function eventsByOp(scopePrefix: string): Promise<Map<string, string[]>> {
  const rows = await t.db.rows<{ id: string; type: string }>(sql`
    SELECT operation_id::text AS id, type FROM idem_events WHERE scope LIKE ${`${scopePrefix}%`} ORDER BY ${sql.raw(EVENT_ORDER)}`);
  const m = new Map<string, string[]>();
  for (const r of rows) m.set(r.id, [...(m.get(r.id) ?? []), r.type]);
  return m;
}

/**
 * A mixed fixture through the service: an expired lease for every effect,
 * dispatched or not, and expired approvals; plus control rows that no sweeper
 * may touch (live leases, approvals with time left, terminal, released, unknown).
 */
async function mixedFixture(api: Api, scope: string, copies: number) {
  const k = (what: string) => `${what}/${randomUUID()}`;
  const lapsing: { key: string; effect: string; dispatched: boolean; approval: boolean }[] = [];
  const controls: string[] = [];
  for (let c = 0; c < copies; c++) {
    for (const effect of EFFECTS) {
      for (const dispatch of [true, false]) {
        const key = k(`lease-${effect}-${dispatch}`);
        await api.begin({ key, request: { c }, effect, dispatch });
        await expireLease(t.db, scope, key);
        lapsing.push({ key, effect, dispatched: dispatch, approval: false });
      }
      const live = k(`live-${effect}`);
      await api.begin({ key: live, request: { c }, effect, leaseMs: 600_000 });
      controls.push(live);
    }
    const appr = k('approval');
    await api.begin({ key: appr, request: { c }, requireApproval: true });
    await expireApproval(t.db, scope, appr);
    lapsing.push({ key: appr, effect: 'unclassified', dispatched: false, approval: true });
    const waiting = k('approval-live');
    await api.begin({ key: waiting, request: { c }, requireApproval: true, approvalTimeoutMs: 3_600_000 });
    const done = k('done');
    const d = await api.begin({ key: done, request: { c } });
    await api.complete(done, d.body.lease.id, 'succeeded', { c });
    const released = k('released');
    const r = await api.begin({ key: released, request: { c } });
    await api.release(released, r.body.lease.id);
    const unknown = k('unknown');
    const u = await api.begin({ key: unknown, request: { c }, effect: 'non_idempotent_write' });
    await api.unknown(unknown, u.body.lease.id);
    controls.push(waiting, done, released, unknown);
  }
  return { lapsing, controls };
}

/** What a lapse turns a row into, or undefined when it must be left alone. */
function expectedLapse(x: { effect: string; dispatched: boolean; approval: boolean }) {
  if (x.approval) return { status: 'rejected', event: 'approval_expired' };
  if (!x.dispatched) return { status: 'ready', event: 'lease_expired' };
  if (x.effect === 'read' || x.effect === 'idempotent_write') return undefined; // the next begin recovers it
  return { status: 'outcome_unknown', event: 'lease_expired' };
}

describe('one sweeper', () => {
  const S = 'sweep-one';
  let api: Api;
  let fx: Awaited<ReturnType<typeof mixedFixture>>;
  beforeAll(async () => {
    api = client(t.app, S);
    fx = await mixedFixture(api, S, 3);
  }, SETUP_MS);

  it('writes every lapse once, dated when it happened; a second pass finds nothing; controls untouched', async () => {
    const rowsBefore = await snapshot(t.db);
    const readsBefore = new Map<string, unknown>();
    for (const x of fx.lapsing) readsBefore.set(x.key, (await api.get(x.key)).body.operation);
    const eventsBefore = await eventsByOp(S);

    const first = await sweepOnce(t.db, settings);
    const lapses = fx.lapsing.map(expectedLapse).filter(Boolean);
    expect(first.leaseExpired).toBe(lapses.filter((l) => l!.event === 'lease_expired').length);
    expect(first.approvalExpired).toBe(lapses.filter((l) => l!.event === 'approval_expired').length);
    const second = await sweepOnce(t.db, settings);
    expect(second).toEqual({ leaseExpired: 0, approvalExpired: 0, purged: 0 });

    const rowsAfter = await snapshot(t.db);
    const byKey = (rows: Record<string, unknown>[], key: string) => rows.find((r) => r.key === key)!;
    const eventsAfter = await eventsByOp(S);
    for (const x of fx.lapsing) {
      const before = byKey(rowsBefore, x.key);
      const after = byKey(rowsAfter, x.key);
      const added = eventsAfter.get(after.id as string)!.slice(eventsBefore.get(after.id as string)!.length);
      const want = expectedLapse(x);
      if (!want) {
        expect(after, x.key).toEqual(before);
        expect(added, x.key).toEqual([]);
      } else {
        expect(after.status, x.key).toBe(want.status);
        expect(after.version).toBe((before.version as number) + 1);
        expect(added, x.key).toEqual([want.event]);
      }
      // A read shows the same operation before and after the sweeper wrote it.
      expect((await api.get(x.key)).body.operation, x.key).toEqual(readsBefore.get(x.key));
    }
    for (const key of fx.controls) {
      expect(byKey(rowsAfter, key), key).toEqual(byKey(rowsBefore, key));
    }
    // Lapse events carry the sweeper as actor and, in detail.lapsedAt, the moment of the lapse.
    const ev = await t.db.rows<{ n: number; actors: string[]; late: number }>(sql`
      SELECT count(*)::int AS n, array_agg(DISTINCT e.actor) AS actors,
        count(*) FILTER (WHERE (e.detail->>'lapsedAt')::timestamptz <> CASE e.type
          WHEN 'approval_expired' THEN o.approval_deadline ELSE o.lease_expires_at END)::int AS late
      FROM idem_events e JOIN idem_operations o ON o.scope = e.scope AND o.id = e.operation_id
      WHERE e.scope = ${S} AND e.type IN ('lease_expired', 'approval_expired')`);
    expect(ev[0]).toEqual({ n: lapses.length, actors: ['sweeper'], late: 0 });
  });
});

describe("the lapse batch's commit", () => {
  it('does not wait for the disk, and that setting ends with its transaction', async () => {
    // One connection, so the statement after the batch runs where the batch ran.
    const one = onPostgres() ? t.testDb.openAnother({ poolMax: 1 }) : t.db;
    const api = client(t.app, 'sweep-commit');
    const key = `lease/${randomUUID()}`;
    await api.begin({ key, request: {} });
    await expireLease(t.db, 'sweep-commit', key);
    const setting = async () =>
      (await one.rows<{ synchronous_commit: string }>(sql`SHOW synchronous_commit`))[0]!.synchronous_commit;
    // On for this session whatever the server's default, so that `off` below can only come from the batch.
    await one.rows(sql`SET synchronous_commit = on`);
    expect((await sweepOnce(one, settings)).leaseExpired).toBeGreaterThanOrEqual(1);
    expect(await setting()).toBe('on');
    // Inside the batch's transaction it is off (here an explicit one, ended by hand).
    await one.rows(sql`BEGIN`);
    let inside: string;
    try {
      await one.rows(sql.raw(lapseBatchText()));
      inside = await setting();
    } finally {
      await one.rows(sql`ROLLBACK`);
    }
    expect(inside).toBe('off');
    expect(await setting()).toBe('on');
  });
});

describe.skipIf(!onPostgres())('F9: four sweepers against 5,000 expired leases', () => {
  const TPL = 'f9-template';
  const SCOPES = ['f9-a', 'f9-b', 'f9-c', 'f9-d'];
  const PER_LEASE_VARIANT = 625; // 8 variants: 5,000 expired leases
  const APPROVALS = 500;
  let pools: Database[];
  /**
   * Bulk fixture SQL and the four sweepers run on pools with generous
   * statement and lock timeouts: this drill is about exactly-once under
   * concurrency, and a busy CI machine must not turn it into a timeout test.
   */
  const patient = { statementTimeoutMs: 120_000, lockTimeoutMs: 60_000 };
  let fixtureDb: Database;

  beforeAll(async () => {
    fixtureDb = t.testDb.openAnother(patient);
    // Templates made by the service, one per variant; the bulk is cloned from
    // them in SQL (only scope, key and id differ), which is what makes 5,000
    // rows affordable here. Clones have no events of their own, so every
    // event on them afterwards is the sweepers'.
    const tpl = client(t.app, TPL);
    for (const effect of EFFECTS) {
      for (const dispatch of [true, false]) {
        await tpl.begin({ key: `lease/${effect}/${dispatch}`, request: { effect }, effect, dispatch });
      }
    }
    await tpl.begin({ key: 'approval', request: {}, requireApproval: true });
    const clone = (where: SQL, n: number) =>
      cloneRows(fixtureDb, sql`o.scope = ${TPL} AND ${where}`, n, sql`'scope', 'f9-' || chr(97 + g % 4)`);
    await clone(sql`o.status = 'in_progress'`, PER_LEASE_VARIANT);
    await clone(sql`o.status = 'pending_approval'`, APPROVALS);
    // Controls cloned too: live leases and approvals with time left, and terminal rows.
    const ctl = client(t.app, TPL);
    const d = await ctl.begin({ key: 'control/done', request: {} });
    await ctl.complete('control/done', d.body.lease.id, 'succeeded', 1);
    await ctl.begin({ key: 'control/live', request: {}, effect: 'non_idempotent_write', leaseMs: 600_000 });
    await ctl.begin({
      key: 'control/waiting',
      request: {},
      requireApproval: true,
      approvalTimeoutMs: 3_600_000,
    });
    await clone(sql`o.key LIKE 'control/%'`, 100);
    // Time travel: the leases and deadlines ran out at scattered moments in the last hour,
    // spread by a hash of the key: Citus refuses random() (VOLATILE) and timestamptz
    // arithmetic over a column (STABLE) in an UPDATE; timestamp arithmetic is IMMUTABLE.
    const scattered = sql`timezone('UTC', timezone('UTC', now()) - ((hashtext(key) & 1023) / 1024.0) * interval '1 hour')`;
    await fixtureDb.rows(sql`UPDATE idem_operations SET lease_expires_at = ${scattered}
      WHERE scope LIKE 'f9-_' AND status = 'in_progress' AND key LIKE 'lease/%'`);
    await fixtureDb.rows(sql`UPDATE idem_operations SET approval_deadline = ${scattered}
      WHERE scope LIKE 'f9-_' AND status = 'pending_approval' AND key LIKE 'approval/%'`);
    pools = [0, 1, 2, 3].map(() => t.testDb.openAnother(patient));
  }, SETUP_MS);

  it('every lapse handled exactly once, idempotent dispatched rows left for begin, nothing else touched', async () => {
    const before = await fixtureDb.rows<Record<string, unknown>>(
      sql`SELECT * FROM idem_operations WHERE scope LIKE 'f9-_' ORDER BY scope, key`,
    );
    expect(before).toHaveLength(8 * PER_LEASE_VARIANT + APPROVALS + 3 * 100);

    // Each with its own scan floor, as the service's sweepers run: the first pass scans
    // from the oldest lease, the later ones from where their own scan stopped.
    const floors = pools.map(() => new LeaseScanFloor());
    const total: SweepResult = { leaseExpired: 0, approvalExpired: 0, purged: 0 };
    for (let round = 0; ; round++) {
      expect(round).toBeLessThan(50);
      const results = await Promise.all(
        pools.map((p, i) => sweepOnce(p, { ...settings, batchSize: 200 }, 'sweeper', floors[i])),
      );
      const n = results.reduce((s, r) => s + r.leaseExpired + r.approvalExpired, 0);
      for (const r of results) {
        total.leaseExpired += r.leaseExpired;
        total.approvalExpired += r.approvalExpired;
        total.purged += r.purged;
      }
      if (n === 0) break;
    }
    // What the sweepers report adds up to exactly one write per lapse.
    expect(total).toEqual({ leaseExpired: 6 * PER_LEASE_VARIANT, approvalExpired: APPROVALS, purged: 0 });

    const perRow = await fixtureDb.rows<{ key: string; types: string[] | null; actors: string[] | null }>(sql`
      SELECT o.key, array_agg(e.type) FILTER (WHERE e.type IS NOT NULL) AS types,
        array_agg(DISTINCT e.actor) FILTER (WHERE e.actor IS NOT NULL) AS actors
      FROM idem_operations o LEFT JOIN idem_events e ON e.scope = o.scope AND e.operation_id = o.id
      WHERE o.scope LIKE 'f9-_' GROUP BY o.scope, o.key`);
    const after = await fixtureDb.rows<Record<string, unknown>>(
      sql`SELECT * FROM idem_operations WHERE scope LIKE 'f9-_' ORDER BY scope, key`,
    );
    const events = new Map(perRow.map((r) => [r.key, r]));
    const counts: Record<string, number> = {};
    for (const [i, row] of after.entries()) {
      const was = before[i]!;
      expect(row.key).toBe(was.key);
      const key = row.key as string;
      const [kind, effect, dispatched] = key.split('/');
      const want =
        kind === 'lease'
          ? expectedLapse({ effect: effect!, dispatched: dispatched === 'true', approval: false })
          : kind === 'approval'
            ? expectedLapse({ effect: 'unclassified', dispatched: false, approval: true })
            : undefined;
      const ev = events.get(key)!;
      if (!want) {
        expect(row, key).toEqual(was);
        expect(ev.types, key).toBeNull();
        counts.untouched = (counts.untouched ?? 0) + 1;
      } else {
        expect(ev.types, key).toEqual([want.event]);
        expect(ev.actors).toEqual(['sweeper']);
        expect(row.status, key).toBe(want.status);
        expect(row.version).toBe((was.version as number) + 1);
        counts[want.event] = (counts[want.event] ?? 0) + 1;
      }
    }
    expect(counts).toEqual({
      lease_expired: 6 * PER_LEASE_VARIANT,
      approval_expired: APPROVALS,
      untouched: 2 * PER_LEASE_VARIANT + 3 * 100,
    });
    // The spread was even: every scope got its share.
    const per = await t.db.rows<{ scope: string }>(
      sql`SELECT DISTINCT scope FROM idem_events WHERE scope LIKE 'f9-_'`,
    );
    expect(per.map((p) => p.scope).sort()).toEqual(SCOPES);
  });

  it('a recovered begin still works on a dispatched idempotent row the sweepers left alone', async () => {
    const r = await client(t.app, 'f9-b').begin({ key: 'lease/read/true/1', request: { effect: 'read' } });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ outcome: 'acquired', recovered: true, lease: { attempt: 2 } });
  });
});

describe('purge', () => {
  const S = 'purge';
  let api: Api;
  /** name -> key; `due` rows get retained_until in the past, `kept` rows keep theirs. */
  const due: Record<string, string> = {};
  const kept: Record<string, string> = {};
  const ids: Record<string, string> = {};
  const PURGEABLE = [
    'succeeded',
    'failed',
    'rejected',
    'approvalExpired',
    'released',
    'approved',
    'resolvedReady',
  ];
  const NEVER = ['live', 'recoverable', 'pending', 'unknown', 'lapsedUnknown', 'reacquired'];

  async function make(set: Record<string, string>, tag: string) {
    const mk = async (name: string, body: Record<string, unknown> = {}) => {
      const key = `${tag}/${name}/${randomUUID()}`;
      set[name] = key;
      const r = await api.begin({ key, request: { name }, ...body });
      ids[key] = r.body.operation.id;
      return r;
    };
    const s = await mk('succeeded');
    await api.complete(set.succeeded!, s.body.lease.id, 'succeeded', { ok: 1 });
    const f = await mk('failed');
    await api.complete(set.failed!, f.body.lease.id, 'failed', { err: 1 });
    await mk('rejected', { requireApproval: true });
    await api.reject(set.rejected!, { note: 'no' });
    await mk('approvalExpired', { requireApproval: true });
    await expireApproval(t.db, S, set.approvalExpired!);
    await sweepOnce(t.db, { ...settings, purgeBatchSize: 1000 });
    const rl = await mk('released');
    await api.release(set.released!, rl.body.lease.id);
    await mk('approved', { requireApproval: true });
    await api.approve(set.approved!);
    const rr = await mk('resolvedReady', { effect: 'non_idempotent_write' });
    await api.unknown(set.resolvedReady!, rr.body.lease.id);
    await api.resolve(set.resolvedReady!, { status: 'ready', note: 'retry it' });
    // Never purgeable, whatever retained_until says.
    await mk('live', { leaseMs: 600_000 });
    await mk('recoverable', { effect: 'idempotent_write' });
    await expireLease(t.db, S, set.recoverable!);
    await mk('pending', { requireApproval: true });
    const u = await mk('unknown', { effect: 'non_idempotent_write' });
    await api.unknown(set.unknown!, u.body.lease.id);
    await mk('lapsedUnknown', { effect: 'unclassified' });
    await expireLease(t.db, S, set.lapsedUnknown!);
    // Released once (so it has a retained_until), then taken again: in_progress.
    const again = await mk('reacquired', { effect: 'read' });
    await api.release(set.reacquired!, again.body.lease.id);
    await api.begin({ key: set.reacquired!, request: { name: 'reacquired' }, leaseMs: 600_000 });
  }

  beforeAll(async () => {
    api = client(t.app, S);
    await make(due, 'due');
    await make(kept, 'kept');
    // Time travel: every `due` row's retention ran out a second ago, even rows
    // that may never be purged; `kept` rows are due in a minute at the earliest.
    for (const key of Object.values(due)) {
      await t.db.rows(sql`UPDATE idem_operations SET retained_until = now() - interval '1 second'
        WHERE scope = ${S} AND key = ${key}`);
    }
    for (const key of Object.values(kept)) {
      await t.db.rows(sql`UPDATE idem_operations SET retained_until = now() + interval '1 minute'
        WHERE scope = ${S} AND key = ${key} AND retained_until IS NOT NULL`);
    }
  }, SETUP_MS);

  it('deletes exactly the terminal and ready rows past retainedUntil, with their events', async () => {
    const reads = new Map<string, unknown>();
    const allKeys = [...Object.values(due), ...Object.values(kept)];
    for (const key of allKeys) reads.set(key, (await api.get(key)).body.operation);
    const eventCounts = await t.db.rows<{ id: string; n: number }>(sql`
      SELECT operation_id::text AS id, count(*)::int AS n FROM idem_events WHERE scope = ${S} GROUP BY operation_id`);
    const purgedIds = PURGEABLE.map((n) => ids[due[n]!]!);
    expect(eventCounts.filter((e) => purgedIds.includes(e.id)).every((e) => e.n > 0)).toBe(true);

    // Small batches, to go through the batch loop.
    const r = await sweepOnce(t.db, { ...settings, purgeBatchSize: 2 });
    expect(r.purged).toBe(PURGEABLE.length);

    for (const name of PURGEABLE) {
      const g = await api.get(due[name]!);
      expect(g.status, name).toBe(404);
      expect((await api.events(due[name]!)).status).toBe(404);
    }
    const left = await t.db.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM idem_events WHERE operation_id IN (${inList(purgedIds)})`,
    );
    expect(left[0]!.n).toBe(0);

    // Everything else reads exactly as before (the lapse the pass wrote reads the same).
    for (const name of NEVER) {
      const g = await api.get(due[name]!);
      expect(g.status, name).toBe(200);
      expect(g.body.operation, name).toEqual(reads.get(due[name]!));
    }
    for (const key of Object.values(kept)) {
      const g = await api.get(key);
      expect(g.status, key).toBe(200);
      expect(g.body.operation, key).toEqual(reads.get(key));
    }
    const keptEvents = await t.db.rows<{ id: string; n: number }>(sql`
      SELECT operation_id::text AS id, count(*)::int AS n FROM idem_events WHERE scope = ${S} GROUP BY operation_id`);
    for (const e of eventCounts.filter((x) => !purgedIds.includes(x.id))) {
      const now = keptEvents.find((x) => x.id === e.id);
      // Unchanged, except the one lapse event the pass may have written for lapsedUnknown.
      expect(now!.n - e.n, e.id).toBeLessThanOrEqual(
        e.id === ids[due.lapsedUnknown!] || e.id === ids[kept.lapsedUnknown!] ? 1 : 0,
      );
    }
    expect((await sweepOnce(t.db, settings)).purged).toBe(0);
  });

  it('a purged key begun again is a new operation: 201, a new id, attempt 1, a fresh event log', async () => {
    for (const name of ['succeeded', 'rejected', 'released']) {
      const key = due[name]!;
      const r = await api.begin({ key, request: { something: 'else' } });
      expect(r.status, name).toBe(201);
      expect(r.body.outcome).toBe('acquired');
      expect(r.body.operation.id).not.toBe(ids[key]);
      expect(r.body.lease.attempt).toBe(1);
      expect(r.body.operation.result).toBeNull();
      const ev = (await api.events(key)).body.events.map((e: { type: string }) => e.type);
      expect(ev).toEqual(['created']);
    }
  });
});

/**
 * What the lapse batch's due scans read, run under EXPLAIN ANALYZE: rows per
 * index scan, with each scan's index condition. Only where nothing is due:
 * EXPLAIN ANALYZE runs the statement.
 */
async function dueScans(db: Database, text: string): Promise<Record<string, { rows: number; cond: string }>> {
  const [row] = await db.rows<{ 'QUERY PLAN': unknown }>(sql.raw(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`));
  const plan = row!['QUERY PLAN'];
  const scans: Record<string, { rows: number; cond: string }> = {};
  const walk = (n: unknown): void => {
    if (Array.isArray(n)) n.forEach(walk);
    else if (n && typeof n === 'object') {
      const node = n as Record<string, unknown>;
      const name = node['Index Name'];
      if (typeof name === 'string' && /lease_expiry|approval_deadline/.test(name))
        scans[name] = { rows: node['Actual Rows'] as number, cond: String(node['Index Cond']) };
      Object.values(node).forEach(walk);
    }
  };
  walk(typeof plan === 'string' ? JSON.parse(plan) : plan);
  return scans;
}

// Citus refuses EXPLAIN ANALYZE of this statement (its event INSERT ... SELECT is not
// pushable to the shards); the sweeps above run it there.
describe.skipIf(onCitus())('a pass with nothing due', () => {
  let own: TestApp;
  beforeAll(async () => {
    own = await createTestApp();
  }, SETUP_MS);
  afterAll(() => own?.close());

  it('reads no row: the clock bounds the due scans as their index condition', async () => {
    const api = client(own.app, 'not-due');
    for (let i = 0; i < 40; i++) {
      await api.begin({ key: `live-${i}`, request: { i }, leaseMs: 600_000 });
      await api.begin({
        key: `waiting-${i}`,
        request: { i },
        requireApproval: true,
        approvalTimeoutMs: 3_600_000,
      });
    }
    const scans = await dueScans(own.db, lapseBatchText());
    expect(Object.keys(scans).sort()).toEqual([
      'idem_operations_approval_deadline_idx',
      'idem_operations_lease_expiry_idx',
    ]);
    for (const s of Object.values(scans)) {
      // 40 live rows in each index: a scan filtered above itself would return them all.
      expect(s.cond).toMatch(/<=/);
      expect(s.rows).toBe(0);
    }
    expect(await sweepOnce(own.db, settings)).toEqual({ leaseExpired: 0, approvalExpired: 0, purged: 0 });
  });
});

describe('the lease scan floor', () => {
  const LEASE_SCAN = 'idem_operations_lease_expiry_idx';
  const nothing: SweepResult = { leaseExpired: 0, approvalExpired: 0, purged: 0 };
  let own: TestApp;
  beforeAll(async () => {
    own = await createTestApp();
  }, SETUP_MS);
  afterAll(() => own?.close());

  /** `n` copies of the scope's row `key`, each with the lease expiry `expiry` gives. */
  const clone = (scope: string, key: string, n: number, expiry: SQL) =>
    cloneRows(own.db, sql`o.scope = ${scope} AND o.key = ${key}`, n, sql`'lease_expires_at', ${expiry}`);
  const statuses = (scope: string) =>
    own.db.rows<{ prefix: string; status: string; version: number; n: number }>(sql`
      SELECT split_part(key, '/', 1) AS prefix, status, version, count(*)::int AS n
      FROM idem_operations WHERE scope = ${scope} AND key LIKE '%/%' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3`);

  it.skipIf(onCitus())(
    'a pass after the first does not read again the expired leases that rule A keeps for the next begin',
    async () => {
      const api = client(own.app, 'floor-read');
      for (const effect of ['read', 'idempotent_write'] as const)
        await api.begin({ key: `stuck-${effect}`, request: {}, effect, dispatch: true });
      await clone(
        'floor-read',
        'stuck-read',
        20,
        sql`to_jsonb(now() - interval '2 minutes' - g * interval '1 second')`,
      );
      await clone('floor-read', 'stuck-idempotent_write', 20, sql`to_jsonb(now() - interval '3 minutes')`);
      await own.db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '5 minutes'
        WHERE scope = 'floor-read' AND key LIKE 'stuck-%' AND key NOT LIKE '%/%'`);
      const before = await statuses('floor-read');
      expect(before.map((r) => [r.prefix, r.status, r.n])).toEqual([
        ['stuck-idempotent_write', 'in_progress', 20],
        ['stuck-read', 'in_progress', 20],
      ]);
      // From the oldest lease, as every pass did: all 42 read, none lapses.
      expect((await dueScans(own.db, lapseBatchText()))[LEASE_SCAN]!.rows).toBe(42);
      const floor = new LeaseScanFloor();
      expect(await sweepOnce(own.db, settings, 'sweeper', floor)).toEqual(nothing);
      expect(floor.after).not.toBeNull();
      // From the floor the first pass left: none read.
      const scan = (await dueScans(own.db, lapseBatchText(floor.after)))[LEASE_SCAN]!;
      expect(scan.cond).toMatch(/>=/);
      expect(scan.rows).toBe(0);
      expect(await statuses('floor-read')).toEqual(before);
    },
  );

  it('hides no lease that lapses: ties at a full batch, new expiries, and below it, the next full scan', async () => {
    const S = 'floor-lapse';
    const api = client(own.app, S);
    await api.begin({ key: 'lapsing', request: {}, dispatch: false });
    await api.begin({ key: 'stuck', request: {}, effect: 'idempotent_write', dispatch: true });
    // 1,100 lapsing leases, expired in groups of 7 that share a moment (a batch of 500
    // ends inside one), between 300 that no pass lapses.
    await clone(
      S,
      'lapsing',
      1100,
      sql`to_jsonb(now() - interval '3 minutes' + (g / 7) * interval '1 millisecond')`,
    );
    await clone(
      S,
      'stuck',
      300,
      sql`to_jsonb(now() - interval '3 minutes' + g * interval '0.5 millisecond')`,
    );
    const [lapsing, stuck] = await statuses(S);
    expect([lapsing!.status, lapsing!.n, stuck!.status, stuck!.n]).toEqual([
      'in_progress',
      1100,
      'in_progress',
      300,
    ]);
    let ms = 0;
    const floor = new LeaseScanFloor(60_000, () => ms);
    // One pass, three batches (500, 500, 100), each from where the one before stopped.
    expect(await sweepOnce(own.db, { ...settings, batchSize: 500 }, 'sweeper', floor)).toEqual({
      ...nothing,
      leaseExpired: 1100,
    });
    expect(await statuses(S)).toEqual([
      { ...lapsing, status: 'ready', version: lapsing!.version + 1 },
      stuck,
    ]);

    // Never within a minute of the clock: a writer that had not committed when a scan
    // passed would have to have begun over a minute before it to fall below.
    const [clock] = await own.db.rows<{ us: string }>(
      sql`SELECT ((extract(epoch FROM now()) * 1000000)::bigint)::text AS us`,
    );
    expect(BigInt(floor.after!)).toBeLessThanOrEqual(BigInt(clock!.us) - 60_000_000n);
    // A lease that expires after the floor was set is found by the next pass.
    await api.begin({ key: 'fresh', request: {}, dispatch: false });
    await expireLease(own.db, S, 'fresh');
    expect(await sweepOnce(own.db, settings, 'sweeper', floor)).toEqual({ ...nothing, leaseExpired: 1 });

    // One below the floor (as after a database clock set back) waits for the full scan,
    // and reads as lapsed meanwhile: reads apply rule A themselves.
    await api.begin({ key: 'below', request: {}, dispatch: false });
    await own.db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '2 hours'
      WHERE scope = ${S} AND key = 'below'`);
    expect(await sweepOnce(own.db, settings, 'sweeper', floor)).toEqual(nothing);
    expect((await api.get('below')).body.operation.status).toBe('ready');
    ms += 60_000;
    expect(await sweepOnce(own.db, settings, 'sweeper', floor)).toEqual({ ...nothing, leaseExpired: 1 });
  });
});
