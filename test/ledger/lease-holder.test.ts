/**
 * Every lease-holder rule of contract section 2, through HTTP: dispatch,
 * heartbeat, complete, release, unknown. A fixture of rows in mixed states
 * (live, expired, ready, terminal, unknown, pending approval) sits in another
 * scope, and every test proves those rows, and their events, were left alone.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/database.js';
import { EVENT_ORDER } from '../../src/ledger/sql/events.js';
import { client, expireLease, type Reply, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

type Row = Record<string, unknown>;
type Api = ReturnType<typeof client>;
type Effect = 'read' | 'idempotent_write' | 'non_idempotent_write' | 'unclassified';

let t: TestApp;
let api: Api;
let fixtureApi: Api;

const FIXTURE_SCOPE = 'fixture';
const k = () => `holder/${randomUUID()}`;

async function allEvents(db: Database): Promise<Row[]> {
  return db.rows(sql`SELECT * FROM idem_events ORDER BY scope, key, version, at, type, id`);
}

async function eventTypes(key: string, scope = 'orders'): Promise<string[]> {
  const rows = await t.db.rows<{ type: string }>(
    sql`SELECT type FROM idem_events WHERE scope = ${scope} AND key = ${key} ORDER BY ${sql.raw(EVENT_ORDER)}`,
  );
  return rows.map((r) => r.type);
}

async function rawRow(key: string, scope = 'orders'): Promise<Row | undefined> {
  return (await snapshot(t.db)).find((r) => r.scope === scope && r.key === key);
}

/** The database clock, in epoch milliseconds. */
async function dbNow(): Promise<number> {
  const rows = await t.db.rows<{ ms: number }>(
    sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS ms`,
  );
  return Math.floor(rows[0]!.ms);
}

const notTarget = (key: string) => (r: Row) => !(r.scope === 'orders' && r.key === key);

interface World {
  rows: Row[];
  events: Row[];
}

async function world(): Promise<World> {
  return { rows: await snapshot(t.db), events: await allEvents(t.db) };
}

/** Every row and event other than the target's is exactly as it was. */
function expectOthersUntouched(before: World, after: World, key: string): void {
  expect(after.rows.filter(notTarget(key))).toEqual(before.rows.filter(notTarget(key)));
  expect(after.events.filter(notTarget(key))).toEqual(before.events.filter(notTarget(key)));
}

/** The target's new events (appended after `before`). */
function newEventsOf(before: World, after: World, key: string): string[] {
  const had = before.events.filter((e) => !notTarget(key)(e)).length;
  return after.events
    .filter((e) => !notTarget(key)(e))
    .slice(had)
    .map((e) => e.type as string);
}

function expectProblem(r: Reply, status: number, code: string): void {
  expect(r.status, r.raw).toBe(status);
  expect(r.headers['content-type']).toContain('application/problem+json');
  expect(r.body.code).toBe(code);
  expect(typeof r.body.retryable).toBe('boolean');
}

/** 409 LEASE_LOST: a retry of the same call can never succeed. */
function expectLeaseLost(r: Reply): void {
  expectProblem(r, 409, 'LEASE_LOST');
  expect(r.body.retryable).toBe(false);
}

interface Held {
  key: string;
  leaseId: string;
  attempt: number;
  begin: Reply;
}

async function acquire(
  opts: { effect?: Effect; dispatch?: boolean; leaseMs?: number; key?: string; request?: unknown } = {},
): Promise<Held> {
  const key = opts.key ?? k();
  const body: Record<string, unknown> = { key, request: opts.request ?? { k: key } };
  if (opts.effect) body.effect = opts.effect;
  if (opts.dispatch !== undefined) body.dispatch = opts.dispatch;
  if (opts.leaseMs !== undefined) body.leaseMs = opts.leaseMs;
  const r = await api.begin(body);
  expect(r.body.outcome, r.raw).toBe('acquired');
  return { key, leaseId: r.body.lease.id, attempt: r.body.lease.attempt, begin: r };
}

/**
 * Three ways a lease gets superseded by a later acquisition: recovered after
 * expiry (dispatched idempotent work), taken over after expiry before dispatch,
 * and re-acquired after a release. Returns the old and the new holder.
 */
const SUPERSEDERS = {
  'recovered after expiry': async () => {
    const a = await acquire({ effect: 'idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expect(b.body).toMatchObject({ outcome: 'acquired', recovered: true });
    return { a, b: { key: a.key, leaseId: b.body.lease.id as string, attempt: 2, begin: b } };
  },
  'taken over after expiry before dispatch': async () => {
    const a = await acquire({ effect: 'non_idempotent_write', dispatch: false });
    await expireLease(t.db, 'orders', a.key);
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expect(b.body.outcome, b.raw).toBe('acquired');
    return { a, b: { key: a.key, leaseId: b.body.lease.id as string, attempt: 2, begin: b } };
  },
  're-acquired after release': async () => {
    const a = await acquire({ effect: 'unclassified' });
    expect((await api.release(a.key, a.leaseId)).status).toBe(200);
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expect(b.body.outcome, b.raw).toBe('acquired');
    return { a, b: { key: a.key, leaseId: b.body.lease.id as string, attempt: 2, begin: b } };
  },
} as const;

/** Rows in every state, in their own scope: none of them may change. */
async function buildFixture(): Promise<void> {
  const f = fixtureApi;
  const begin = async (key: string, extra: Record<string, unknown> = {}) => {
    const r = await f.begin({ key, request: { key }, leaseMs: 3_600_000, ...extra });
    expect(r.status, r.raw).toBeLessThan(300);
    return r;
  };
  await begin('live-dispatched', { effect: 'non_idempotent_write' });
  await begin('live-undispatched', { dispatch: false });
  await begin('expired-dispatched-unknown', { effect: 'unclassified' });
  await expireLease(t.db, FIXTURE_SCOPE, 'expired-dispatched-unknown');
  await begin('expired-dispatched-idempotent', { effect: 'idempotent_write' });
  await expireLease(t.db, FIXTURE_SCOPE, 'expired-dispatched-idempotent');
  await begin('expired-undispatched', { dispatch: false });
  await expireLease(t.db, FIXTURE_SCOPE, 'expired-undispatched');
  const rel = await begin('ready');
  await f.release('ready', rel.body.lease.id);
  const ok = await begin('succeeded');
  await f.complete('succeeded', ok.body.lease.id, 'succeeded', { n: 1 });
  const ko = await begin('failed');
  await f.complete('failed', ko.body.lease.id, 'failed', { error: 'boom' });
  const unk = await begin('unknown');
  await f.unknown('unknown', unk.body.lease.id);
  await begin('pending', { requireApproval: true });
}

beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
  fixtureApi = client(t.app, FIXTURE_SCOPE);
  await buildFixture();
});
afterAll(() => t.close());

const HOLDER_CALLS = {
  dispatch: (key: string, leaseId: string) => api.dispatch(key, leaseId),
  heartbeat: (key: string, leaseId: string) => api.heartbeat(key, leaseId, 10_000),
  complete: (key: string, leaseId: string) => api.complete(key, leaseId, 'succeeded', { x: 1 }),
  release: (key: string, leaseId: string) => api.release(key, leaseId),
  unknown: (key: string, leaseId: string) => api.unknown(key, leaseId),
} as const;

describe('every lease-holder call', () => {
  for (const [name, call] of Object.entries(HOLDER_CALLS)) {
    it(`${name}: an unknown key is 404 NOT_FOUND and writes nothing`, async () => {
      const before = await world();
      const r = await call(k(), randomUUID());
      expectProblem(r, 404, 'NOT_FOUND');
      expect(await world()).toEqual(before);
    });

    it(`${name}: a key that exists only in another scope is 404 NOT_FOUND`, async () => {
      const before = await world();
      // `live-dispatched` exists in scope `fixture`, not in `orders`.
      const r = await call('live-dispatched', randomUUID());
      expectProblem(r, 404, 'NOT_FOUND');
      expect(await world()).toEqual(before);
    });

    it(`${name}: a wrong lease id on a live operation is 409 LEASE_LOST and changes nothing`, async () => {
      const a = await acquire({ dispatch: false, effect: 'non_idempotent_write' });
      const before = await world();
      const r = await call(a.key, randomUUID());
      expectLeaseLost(r);
      expect(r.body.operation).toMatchObject({ key: a.key, status: 'in_progress', attempt: 1 });
      const after = await world();
      expect(after.rows).toEqual(before.rows);
      expectOthersUntouched(before, after, a.key);
      // The holder still holds it.
      expect((await api.dispatch(a.key, a.leaseId)).status).toBe(200);
    });

    it(`${name}: a superseded lease is 409 LEASE_LOST and changes nothing`, async () => {
      const { a, b } = await SUPERSEDERS['recovered after expiry']();
      const before = await world();
      const r = await call(a.key, a.leaseId);
      expectLeaseLost(r);
      // The new holder's lease id is a secret: never in the old holder's answer.
      expect(r.raw).not.toContain(b.leaseId);
      expect(r.body.operation).toMatchObject({ status: 'in_progress', attempt: 2 });
      const after = await world();
      expect(after.rows).toEqual(before.rows);
      expectOthersUntouched(before, after, a.key);
      // The new holder is unaffected.
      expect((await api.heartbeat(b.key, b.leaseId, 10_000)).status).toBe(200);
    });

    if (name === 'complete' || name === 'release' || name === 'unknown') {
      // Section 2: for complete, release and unknown, "A superseded lease gets
      // 409 LEASE_LOST and changes nothing (event stale_completion_rejected)".
      it(`${name}: a superseded lease's refusal is recorded once as event stale_completion_rejected`, async () => {
        const { a } = await SUPERSEDERS['re-acquired after release']();
        const before = await world();
        expectLeaseLost(await call(a.key, a.leaseId));
        const after = await world();
        expect(after.rows).toEqual(before.rows);
        expect(newEventsOf(before, after, a.key)).toEqual(['stale_completion_rejected']);
      });
    }
  }
});

describe('dispatch', () => {
  it('marks a live, undispatched lease dispatched, once', async () => {
    const a = await acquire({ dispatch: false, effect: 'unclassified' });
    const before = await world();
    const r = await api.dispatch(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'in_progress', attempt: 1 });
    expect(r.body.operation.lease.dispatchedAt).not.toBeNull();
    expect(r.body.lease).toMatchObject({ id: a.leaseId, attempt: 1 });
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toEqual(['dispatched']);
    // Dispatched now: after expiry rule A makes it outcome_unknown, not ready.
    await expireLease(t.db, 'orders', a.key);
    expect((await api.get(a.key)).body.operation.status).toBe('outcome_unknown');
  });

  it('repeated on a live, dispatched lease is 200 and changes nothing', async () => {
    const a = await acquire({ dispatch: false });
    const first = await api.dispatch(a.key, a.leaseId);
    expect(first.status).toBe(200);
    const before = await world();
    const again = await api.dispatch(a.key, a.leaseId);
    expect(again.status, again.raw).toBe(200);
    expect(again.body.operation.lease.dispatchedAt).toBe(first.body.operation.lease.dispatchedAt);
    expect(await world()).toEqual(before);
  });

  it('an expired lease (not superseded) is 409 LEASE_LOST and changes nothing', async () => {
    const a = await acquire({ dispatch: false, effect: 'non_idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    const before = await world();
    const r = await api.dispatch(a.key, a.leaseId);
    expectLeaseLost(r);
    expect(await world()).toEqual(before);
    // Never dispatched, so the next begin takes it over as a fresh attempt.
    expect((await api.get(a.key)).body.operation.status).toBe('ready');
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expect(b.body).toMatchObject({ outcome: 'acquired', lease: { attempt: 2 } });
    expect(b.body.recovered).toBeUndefined();
  });

  it('after the holder completed is 409 LEASE_LOST and changes nothing', async () => {
    const a = await acquire({ dispatch: false });
    expect((await api.complete(a.key, a.leaseId, 'failed', { e: 'validation' })).status).toBe(200);
    const before = await world();
    expectLeaseLost(await api.dispatch(a.key, a.leaseId));
    expect(await world()).toEqual(before);
  });
});

describe('heartbeat', () => {
  it('extends the lease by leaseMs from the database now, not from the old expiry', async () => {
    const a = await acquire({ leaseMs: 3_600_000 });
    const before = await world();
    const from = await dbNow();
    const r = await api.heartbeat(a.key, a.leaseId, 5_000);
    const to = await dbNow();
    expect(r.status, r.raw).toBe(200);
    const expiresAt = Date.parse(r.body.lease.expiresAt);
    expect(r.body.lease).toMatchObject({ id: a.leaseId, attempt: 1 });
    expect(r.body.operation.lease.expiresAt).toBe(r.body.lease.expiresAt);
    // now() of the heartbeat's own statement: the same instant as updatedAt.
    expect(expiresAt - Date.parse(r.body.operation.updatedAt)).toBe(5_000);
    expect(expiresAt - 5_000).toBeGreaterThanOrEqual(from);
    expect(expiresAt - 5_000).toBeLessThanOrEqual(to);
    // Shorter than what was left: measured from now, so the lease got shorter.
    expect(expiresAt).toBeLessThan(Date.parse(a.begin.body.lease.expiresAt));
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    const g = await api.get(a.key);
    expect(g.body.operation.lease.expiresAt).toBe(r.body.lease.expiresAt);
    expect(g.body.operation.status).toBe('in_progress');
  });

  it('keeps the lease live: another begin still gets OPERATION_IN_PROGRESS', async () => {
    const a = await acquire({ leaseMs: 1_000 });
    const r = await api.heartbeat(a.key, a.leaseId, 60_000);
    expect(r.status).toBe(200);
    const other = await api.begin({ key: a.key, request: { k: a.key } });
    expectProblem(other, 409, 'OPERATION_IN_PROGRESS');
    expect(Number(other.headers['retry-after'])).toBeGreaterThan(50);
  });

  it('an expired lease (not superseded) is 409 LEASE_LOST and changes nothing', async () => {
    for (const effect of ['read', 'non_idempotent_write'] as const) {
      const a = await acquire({ effect });
      await expireLease(t.db, 'orders', a.key);
      const before = await world();
      const r = await api.heartbeat(a.key, a.leaseId, 60_000);
      expectLeaseLost(r);
      expect(await world()).toEqual(before);
    }
  });

  it('after the holder marked it unknown is 409 LEASE_LOST and changes nothing', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    expect((await api.unknown(a.key, a.leaseId)).status).toBe(200);
    const before = await world();
    expectLeaseLost(await api.heartbeat(a.key, a.leaseId, 60_000));
    expect(await world()).toEqual(before);
    expect((await api.get(a.key)).body.operation.status).toBe('outcome_unknown');
  });
});

describe('complete', () => {
  for (const status of ['succeeded', 'failed'] as const) {
    it(`a live lease stores ${status} with its result; terminal, replayed after`, async () => {
      const a = await acquire({ effect: 'non_idempotent_write' });
      const before = await world();
      const result = status === 'succeeded' ? { ticket: 'T-9', amount: 30.5 } : { error: 'card_declined' };
      const r = await api.complete(a.key, a.leaseId, status, result);
      expect(r.status, r.raw).toBe(200);
      expect(r.body.operation).toMatchObject({ status, result, attempt: 1, lease: null });
      expect(r.body.operation.completedAt).not.toBeNull();
      expect(r.body.operation.retainedUntil).not.toBeNull();
      const after = await world();
      expectOthersUntouched(before, after, a.key);
      expect(newEventsOf(before, after, a.key)).toEqual(['completed']);
      const replay = await api.begin({ key: a.key, request: { k: a.key } });
      expect(replay.body).toMatchObject({ outcome: 'replayed', operation: { status, result } });
    });
  }

  it('without a result stores null', async () => {
    const a = await acquire();
    const r = await api.complete(a.key, a.leaseId, 'succeeded');
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'succeeded', result: null });
  });

  it('an expired, dispatched idempotent lease nobody took over is accepted: completed', async () => {
    const a = await acquire({ effect: 'idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    const before = await world();
    const r = await api.complete(a.key, a.leaseId, 'succeeded', { v: 1 });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'succeeded', result: { v: 1 }, attempt: 1 });
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    const added = newEventsOf(before, after, a.key);
    expect(added.filter((e) => e === 'completed')).toHaveLength(1);
    expect(added).not.toContain('late_completion');
  });

  it('an expired lease that was never dispatched (reads ready) is accepted', async () => {
    const a = await acquire({ effect: 'non_idempotent_write', dispatch: false });
    await expireLease(t.db, 'orders', a.key);
    expect((await api.get(a.key)).body.operation.status).toBe('ready');
    const before = await world();
    const r = await api.complete(a.key, a.leaseId, 'failed', { e: 'validation failed' });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'failed', result: { e: 'validation failed' } });
    expectOthersUntouched(before, await world(), a.key);
  });

  it('late completion of a rule-A outcome_unknown (nothing wrote it yet) records the real outcome', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    expect((await api.get(a.key)).body.operation.status).toBe('outcome_unknown');
    const before = await world();
    const r = await api.complete(a.key, a.leaseId, 'succeeded', { charged: true });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'succeeded', result: { charged: true }, attempt: 1 });
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    const added = newEventsOf(before, after, a.key);
    expect(added.filter((e) => e === 'late_completion')).toHaveLength(1);
    expect(added).not.toContain('completed');
    const replay = await api.begin({ key: a.key, request: { k: a.key } });
    expect(replay.body).toMatchObject({ outcome: 'replayed', operation: { result: { charged: true } } });
  });

  it('late completion after the holder said unknown records the real outcome (late_completion)', async () => {
    const a = await acquire({ effect: 'unclassified' });
    expect((await api.unknown(a.key, a.leaseId)).status).toBe(200);
    const before = await world();
    const r = await api.complete(a.key, a.leaseId, 'failed', { error: 'timeout upstream, not charged' });
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.status).toBe('failed');
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toEqual(['late_completion']);
  });

  it('late completion after a begin wrote the rule-A lapse records the real outcome', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    const blocked = await api.begin({ key: a.key, request: { k: a.key } });
    expectProblem(blocked, 409, 'OUTCOME_UNKNOWN');
    const before = await world();
    const r = await api.complete(a.key, a.leaseId, 'succeeded', { ok: 1 });
    expect(r.status, r.raw).toBe(200);
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toEqual(['late_completion']);
    expect(await eventTypes(a.key)).toEqual(['created', 'lease_expired', 'late_completion']);
  });

  for (const [how, supersede] of Object.entries(SUPERSEDERS)) {
    it(`a lease superseded (${how}) is 409 LEASE_LOST, changes nothing, event stale_completion_rejected`, async () => {
      const { a, b } = await supersede();
      const before = await world();
      const r = await api.complete(a.key, a.leaseId, 'succeeded', { from: 'old holder' });
      expectLeaseLost(r);
      expect(r.raw).not.toContain(b.leaseId);
      const after = await world();
      expect(after.rows).toEqual(before.rows);
      expectOthersUntouched(before, after, a.key);
      expect(newEventsOf(before, after, a.key)).toEqual(['stale_completion_rejected']);
      // The current holder completes normally; the old one is still refused after.
      const done = await api.complete(b.key, b.leaseId, 'succeeded', { from: 'new holder' });
      expect(done.status, done.raw).toBe(200);
      const late = await api.complete(a.key, a.leaseId, 'succeeded', { from: 'new holder' });
      expectLeaseLost(late);
      const g = await api.get(a.key);
      expect(g.body.operation).toMatchObject({
        status: 'succeeded',
        result: { from: 'new holder' },
        attempt: 2,
      });
      const types = await eventTypes(a.key);
      expect(types.filter((e) => e === 'completed' || e === 'late_completion')).toHaveLength(1);
      expect(types.filter((e) => e === 'stale_completion_rejected')).toHaveLength(2);
    });
  }

  it('a superseded lease whose successor also expired is still 409 LEASE_LOST', async () => {
    const { a, b } = await SUPERSEDERS['recovered after expiry']();
    await expireLease(t.db, 'orders', b.key);
    const before = await world();
    expectLeaseLost(await api.complete(a.key, a.leaseId, 'succeeded', 1));
    const after = await world();
    expect(after.rows).toEqual(before.rows);
    expectOthersUntouched(before, after, a.key);
    // The successor's expired lease is not superseded: it may still report.
    expect((await api.complete(b.key, b.leaseId, 'succeeded', 2)).status).toBe(200);
  });

  describe('onto an operation already terminal', () => {
    it('the same status and result again is 200 and changes nothing', async () => {
      const a = await acquire();
      const first = await api.complete(a.key, a.leaseId, 'succeeded', { ticket: 'T-1', lines: [1, 2] });
      expect(first.status).toBe(200);
      const before = await world();
      const again = await api.complete(a.key, a.leaseId, 'succeeded', { ticket: 'T-1', lines: [1, 2] });
      expect(again.status, again.raw).toBe(200);
      expect(again.body.operation).toEqual(first.body.operation);
      expect(await world()).toEqual(before);
    });

    it('an equal result spelled differently (key order, 1.0 vs 1) is the same result', async () => {
      const a = await acquire();
      const url = `/v1/scopes/orders/operations/${encodeURIComponent(a.key)}/complete`;
      const first = await api.call(
        'POST',
        url,
        `{"leaseId":"${a.leaseId}","status":"failed","result":{"a":1.0,"b":{"y":"\\u00e9","x":null}}}`,
      );
      expect(first.status, first.raw).toBe(200);
      const before = await world();
      const again = await api.call(
        'POST',
        url,
        `{"result":{"b":{"x":null,"y":"é"},"a":1},"status":"failed","leaseId":"${a.leaseId}"}`,
      );
      expect(again.status, again.raw).toBe(200);
      expect(await world()).toEqual(before);
    });

    it('no result, twice, is the same result', async () => {
      const a = await acquire();
      expect((await api.complete(a.key, a.leaseId, 'succeeded')).status).toBe(200);
      const before = await world();
      expect((await api.complete(a.key, a.leaseId, 'succeeded')).status).toBe(200);
      expect(await world()).toEqual(before);
    });

    const MISMATCHES: [string, 'succeeded' | 'failed', unknown][] = [
      ['another result', 'succeeded', { ticket: 'T-2' }],
      ['another status, same result', 'failed', { ticket: 'T-1' }],
      ['no result where there was one', 'succeeded', undefined],
      ['a result of another type', 'succeeded', 'T-1'],
    ];
    for (const [what, status, result] of MISMATCHES) {
      it(`${what}: 409 RESULT_MISMATCH, changes nothing, event result_mismatch`, async () => {
        const a = await acquire();
        expect((await api.complete(a.key, a.leaseId, 'succeeded', { ticket: 'T-1' })).status).toBe(200);
        const before = await world();
        const r = await api.complete(a.key, a.leaseId, status, result);
        expectProblem(r, 409, 'RESULT_MISMATCH');
        expect(r.body.retryable).toBe(false);
        expect(r.body.operation).toMatchObject({ status: 'succeeded', result: { ticket: 'T-1' } });
        const after = await world();
        expect(after.rows).toEqual(before.rows);
        expectOthersUntouched(before, after, a.key);
        expect(newEventsOf(before, after, a.key)).toEqual(['result_mismatch']);
      });
    }

    it('a late completion that matches is 200; one that differs is RESULT_MISMATCH', async () => {
      const a = await acquire({ effect: 'non_idempotent_write' });
      await expireLease(t.db, 'orders', a.key);
      expect((await api.complete(a.key, a.leaseId, 'succeeded', { n: 1 })).status).toBe(200);
      let before = await world();
      expect((await api.complete(a.key, a.leaseId, 'succeeded', { n: 1 })).status).toBe(200);
      expect(await world()).toEqual(before);
      before = await world();
      expectProblem(await api.complete(a.key, a.leaseId, 'failed', { n: 1 }), 409, 'RESULT_MISMATCH');
      const after = await world();
      expect(after.rows).toEqual(before.rows);
      expect(newEventsOf(before, after, a.key)).toEqual(['result_mismatch']);
    });
  });
});

describe('release', () => {
  it('a live lease goes back to ready; the next begin acquires attempt 2', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    const before = await world();
    const r = await api.release(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'ready', attempt: 1, lease: null });
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toEqual(['released']);
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ outcome: 'acquired', lease: { attempt: 2 } });
    expect(b.body.recovered).toBeUndefined();
  });

  it('an expired, dispatched idempotent lease nobody took over is accepted', async () => {
    const a = await acquire({ effect: 'read' });
    await expireLease(t.db, 'orders', a.key);
    const before = await world();
    const r = await api.release(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.status).toBe('ready');
    expectOthersUntouched(before, await world(), a.key);
  });

  it('a rule-A outcome_unknown released by its last holder (it knows the effect did not happen) is ready', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    expect((await api.get(a.key)).body.operation.status).toBe('outcome_unknown');
    const before = await world();
    const r = await api.release(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.status).toBe('ready');
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toContain('released');
    expect((await api.begin({ key: a.key, request: { k: a.key } })).body.outcome).toBe('acquired');
  });
});

describe('unknown', () => {
  it('a live lease becomes outcome_unknown; begin then refuses to run it again', async () => {
    const a = await acquire({ effect: 'non_idempotent_write' });
    const before = await world();
    const r = await api.unknown(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'outcome_unknown', attempt: 1 });
    const after = await world();
    expectOthersUntouched(before, after, a.key);
    expect(newEventsOf(before, after, a.key)).toEqual(['marked_unknown']);
    const b = await api.begin({ key: a.key, request: { k: a.key } });
    expectProblem(b, 409, 'OUTCOME_UNKNOWN');
    expect(b.body.retryable).toBe(false);
  });

  it('an expired, dispatched idempotent lease nobody took over: outcome_unknown, and no begin recovers it', async () => {
    const a = await acquire({ effect: 'idempotent_write' });
    await expireLease(t.db, 'orders', a.key);
    const before = await world();
    const r = await api.unknown(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.status).toBe('outcome_unknown');
    expectOthersUntouched(before, await world(), a.key);
    expectProblem(await api.begin({ key: a.key, request: { k: a.key } }), 409, 'OUTCOME_UNKNOWN');
  });

  it('on a rule-A outcome_unknown by its last holder: 200 outcome_unknown', async () => {
    const a = await acquire({ effect: 'unclassified' });
    await expireLease(t.db, 'orders', a.key);
    const before = await world();
    const r = await api.unknown(a.key, a.leaseId);
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.status).toBe('outcome_unknown');
    expectOthersUntouched(before, await world(), a.key);
    expect((await api.get(a.key)).body.operation.status).toBe('outcome_unknown');
  });
});

/**
 * release and unknown end a lease the same way in three respects, tested once
 * for both: a repeat is a no-op, a superseded holder is refused without
 * touching the new holder's work, and neither undoes a completion.
 */
const LEASE_ENDERS = {
  release: { call: HOLDER_CALLS.release, completedAs: 'succeeded' },
  unknown: { call: HOLDER_CALLS.unknown, completedAs: 'failed' },
} as const;

describe('release and unknown', () => {
  for (const [name, { call, completedAs }] of Object.entries(LEASE_ENDERS)) {
    it(`${name} is idempotent: the same call again is 200 and changes nothing`, async () => {
      const a = await acquire();
      const first = await call(a.key, a.leaseId);
      expect(first.status).toBe(200);
      const before = await world();
      const again = await call(a.key, a.leaseId);
      expect(again.status, again.raw).toBe(200);
      expect(again.body.operation).toEqual(first.body.operation);
      expect(await world()).toEqual(before);
    });

    for (const [how, supersede] of Object.entries(SUPERSEDERS)) {
      it(`${name}: a lease superseded (${how}) is 409 LEASE_LOST and changes nothing`, async () => {
        const { a, b } = await supersede();
        const before = await world();
        const r = await call(a.key, a.leaseId);
        expectLeaseLost(r);
        expect(r.raw).not.toContain(b.leaseId);
        const after = await world();
        expect(after.rows).toEqual(before.rows);
        expectOthersUntouched(before, after, a.key);
        // The current holder's work is neither handed back nor turned into an unknown outcome.
        expect((await api.get(a.key)).body.operation).toMatchObject({ status: 'in_progress', attempt: 2 });
      });
    }

    it(`${name} after the holder completed is 409 INVALID_STATE and changes nothing`, async () => {
      const a = await acquire();
      expect((await api.complete(a.key, a.leaseId, completedAs, 1)).status).toBe(200);
      const before = await world();
      const r = await call(a.key, a.leaseId);
      expectProblem(r, 409, 'INVALID_STATE');
      expect(await world()).toEqual(before);
    });
  }
});

describe('the fixture', () => {
  it('reads as built: every state is present, so the untouched checks above covered them all', async () => {
    const statuses: Record<string, string> = {};
    for (const key of [
      'live-dispatched',
      'live-undispatched',
      'expired-dispatched-unknown',
      'expired-dispatched-idempotent',
      'expired-undispatched',
      'ready',
      'succeeded',
      'failed',
      'unknown',
      'pending',
    ]) {
      const r = await fixtureApi.get(key);
      statuses[key] = r.body.operation.status;
    }
    expect(statuses).toEqual({
      'live-dispatched': 'in_progress',
      'live-undispatched': 'in_progress',
      'expired-dispatched-unknown': 'outcome_unknown',
      'expired-dispatched-idempotent': 'in_progress',
      'expired-undispatched': 'ready',
      ready: 'ready',
      succeeded: 'succeeded',
      failed: 'failed',
      unknown: 'outcome_unknown',
      pending: 'pending_approval',
    });
    // The rule-A rows were only ever read: nothing wrote their lapse.
    expect((await rawRow('expired-dispatched-unknown', FIXTURE_SCOPE))?.status).toBe('in_progress');
    expect((await rawRow('expired-undispatched', FIXTURE_SCOPE))?.status).toBe('in_progress');
  });
});
