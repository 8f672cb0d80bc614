/**
 * Drill F7: clock skew. Two service replicas run with their wall clock 30 s
 * ahead and 30 s behind (`NODE_OPTIONS=--import clock-skew-preload.mjs`),
 * next to one with the right time, all on one database. Leases are decided by
 * the database clock, so the skew changes no outcome:
 * - a live lease is live on every replica (409 OPERATION_IN_PROGRESS, reads
 *   say in_progress), even on the one that thinks it ran out 10 s ago, and
 *   its sweeper lapses nothing early;
 * - an expired lease is acquirable exactly when the database says so: every
 *   refusal started before the lease's expiry by the database clock and every
 *   acquisition ended after it, whichever replica holds and which asks;
 * - rule A on reads flips at the database's expiry on every replica;
 * - createdAt, expiresAt, completedAt, retainedUntil and event times are the
 *   database's;
 * - the same script gives the same answers and the same effects on each.
 */
import { randomUUID } from 'node:crypto';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onPostgres } from '../support/engine.js';
import { type RunningService, startService } from '../support/service.js';
import { Downstream } from './support/downstream.js';
import { type Ledger, ledger, type RawReply } from './support/raw-http.js';
import { Replica, sleep, stopAll } from './support/replica.js';

const SKEW_MS = 30_000;
const PRELOAD = pathToFileURL(fileURLToPath(new URL('./clock-skew-preload.mjs', import.meta.url))).href;

// Replicas in other processes (with their own clocks) on one real database: Postgres only.
describe.skipIf(!onPostgres())('F7 clock skew: a replica 30 s off changes no outcome', () => {
  let testDb: TestDatabase;
  let exact: RunningService;
  const ahead = () => replicas[0]!;
  const behind = () => replicas[1]!;
  const replicas: Replica[] = [];
  const downstream = new Downstream();
  const api: Record<'exact' | 'ahead' | 'behind', Ledger> = {} as never;

  /** The database's clock, in epoch milliseconds. */
  const dbNow = async () =>
    (
      await testDb.db.rows<{ t: number }>(
        sql`SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS t`,
      )
    )[0]!.t;
  /** A call bracketed by the database clock: its statement's now() lies in [before, after]. */
  const timed = async (call: () => Promise<RawReply>) => {
    const before = await dbNow();
    const r = await call();
    return { r, before, after: await dbNow() };
  };
  const ms = (iso: string) => new Date(iso).getTime();

  beforeAll(async () => {
    testDb = await createTestDatabase();
    for (const [name, skew] of [
      ['ahead', SKEW_MS],
      ['behind', -SKEW_MS],
    ] as const) {
      replicas.push(
        new Replica({
          name: `f7-${name}`,
          databaseUrl: testDb.url!,
          env: {
            NODE_OPTIONS: `--import ${PRELOAD}`,
            IDEM_CLOCK_SKEW_MS: String(skew),
            IDEM_SWEEP_INTERVAL_MS: '200',
          },
        }),
      );
    }
    const [svc] = await Promise.all([
      startService({ testDb }),
      ...replicas.map((r) => r.start()),
      downstream.start(),
    ]);
    exact = svc as RunningService;
    api.exact = ledger(() => exact.url);
    api.ahead = ledger(() => ahead().url);
    api.behind = ledger(() => behind().url);
  }, 120_000);

  afterAll(async () => {
    await stopAll(replicas);
    await exact?.close();
    await downstream.close();
    await testDb?.drop();
  }, 60_000);

  it('the skew is real: each replica logs with its own clock', () => {
    for (const [r, skew] of [
      [ahead(), SKEW_MS],
      [behind(), -SKEW_MS],
    ] as const) {
      const first = r.lines.find((l) => l.line.startsWith('{'))!;
      const logged = JSON.parse(first.line).time as number;
      // Written a moment before it arrived; the lag on a busy machine is far below 10 s.
      expect(Math.abs(logged - first.at - skew), r.opts.name).toBeLessThan(10_000);
    }
  });

  it('a live lease is live on every replica, whatever its clock says; skewed sweepers lapse nothing', async () => {
    for (const holder of ['exact', 'ahead', 'behind'] as const) {
      const key = `f7/live/${holder}/${randomUUID()}`;
      const request = { n: 1 };
      const leaseId = randomUUID();
      const b = await api[holder].begin({
        key,
        request,
        effect: 'non_idempotent_write',
        leaseMs: 20_000,
        leaseId,
      });
      expect([b.status, b.body.outcome]).toEqual([201, 'acquired']);
      await downstream.perform({ key, attempt: 1, leaseId, worker: holder, value: 1 });
      await sleep(1000); // several sweeper passes of the skewed replicas (every ~200 ms)
      for (const asker of ['exact', 'ahead', 'behind'] as const) {
        const other = await api[asker].begin({ key, request, leaseId: randomUUID() });
        expect([holder, asker, other.status, other.body.code]).toEqual([
          holder,
          asker,
          409,
          'OPERATION_IN_PROGRESS',
        ]);
        const g = await api[asker].get(key);
        expect([holder, asker, g.body.operation.status, g.body.operation.lease.expiresAt]).toEqual([
          holder,
          asker,
          'in_progress',
          b.body.lease.expiresAt,
        ]);
      }
      // The holder carries on through a skewed replica.
      expect((await api.ahead.heartbeat(key, leaseId, 20_000)).status).toBe(200);
      const c = await api.behind.complete(key, leaseId, 'succeeded', { ok: holder });
      expect(c.status).toBe(200);
      const types = ((await api.exact.events(key)).body.events as { type: string }[]).map((e) => e.type);
      expect(types).toEqual(['created', 'completed']);
      expect(downstream.count(key)).toBe(1);
    }
  }, 60_000);

  for (const [holderName, askerName, dispatch] of [
    ['ahead', 'behind', true],
    ['behind', 'ahead', false],
  ] as const) {
    it(`an expired lease is acquirable exactly when the database says so (held via ${holderName}, asked via ${askerName})`, async () => {
      const key = `f7/expiry/${holderName}/${randomUUID()}`;
      const request = { n: 2 };
      const holder = api[holderName];
      const asker = api[askerName];
      const b = await holder.begin({
        key,
        request,
        effect: 'idempotent_write',
        leaseMs: 2000,
        dispatch,
        leaseId: randomUUID(),
      });
      expect(b.status).toBe(201);
      if (dispatch)
        await downstream.perform({ key, attempt: 1, leaseId: b.body.lease.id, worker: 'holder', value: 2 });
      const expiresAt = ms(b.body.lease.expiresAt);
      const leaseId = randomUUID();
      let refused = 0;
      let got: Awaited<ReturnType<typeof timed>>;
      for (;;) {
        got = await timed(() => asker.begin({ key, request, effect: 'idempotent_write', leaseId }));
        if (got.r.status !== 409) break;
        expect(got.r.body.code).toBe('OPERATION_IN_PROGRESS');
        // Refused: its statement ran before the expiry (expiresAt is cut to the millisecond).
        expect(got.before).toBeLessThan(expiresAt + 1);
        refused++;
        expect(refused).toBeLessThan(200);
        await sleep(50);
      }
      // Acquired: its statement ran at or after the expiry, and not on the asker's clock.
      expect(got.r.status).toBe(200);
      expect(got.r.body).toMatchObject({ outcome: 'acquired', lease: { id: leaseId, attempt: 2 } });
      expect(got.r.body.recovered === true).toBe(dispatch);
      expect(got.after).toBeGreaterThanOrEqual(expiresAt);
      expect(refused).toBeGreaterThan(0);
      await downstream.perform({ key, attempt: 2, leaseId, worker: 'asker', value: 2 });
      expect((await asker.complete(key, leaseId, 'succeeded', { n: 2 })).status).toBe(200);
      expect(downstream.count(key)).toBe(dispatch ? 2 : 1);
    }, 60_000);
  }

  it('rule A on reads flips at the database expiry on every replica', async () => {
    const key = `f7/rule-a/${randomUUID()}`;
    const b = await api.exact.begin({
      key,
      request: { n: 3 },
      effect: 'non_idempotent_write',
      leaseMs: 2000,
    });
    expect(b.status).toBe(201);
    await downstream.perform({ key, attempt: 1, leaseId: b.body.lease.id, worker: 'holder', value: 3 });
    const expiresAt = ms(b.body.lease.expiresAt);
    const seen: Record<string, Set<string>> = { ahead: new Set(), behind: new Set() };
    for (;;) {
      for (const name of ['ahead', 'behind'] as const) {
        const { r, before, after } = await timed(() => api[name].get(key));
        const status = r.body.operation.status as string;
        seen[name]!.add(status);
        if (status === 'in_progress') expect(before).toBeLessThan(expiresAt + 1);
        else {
          expect([name, status]).toEqual([name, 'outcome_unknown']);
          expect(after).toBeGreaterThanOrEqual(expiresAt);
        }
      }
      if (seen.ahead!.has('outcome_unknown') && seen.behind!.has('outcome_unknown')) break;
      expect(await dbNow()).toBeLessThan(expiresAt + 10_000);
      await sleep(50);
    }
    expect(seen.ahead).toEqual(new Set(['in_progress', 'outcome_unknown']));
    expect(seen.behind).toEqual(new Set(['in_progress', 'outcome_unknown']));
    const again = await api.behind.begin({ key, request: { n: 3 } });
    expect([again.status, again.body.code]).toEqual([409, 'OUTCOME_UNKNOWN']);
    expect(downstream.count(key)).toBe(1);
  }, 60_000);

  it('createdAt, expiresAt, completedAt, retainedUntil and event times come from the database', async () => {
    for (const name of ['ahead', 'behind'] as const) {
      const key = `f7/times/${name}/${randomUUID()}`;
      const leaseId = randomUUID();
      const b = await timed(() => api[name].begin({ key, request: { n: 4 }, leaseMs: 10_000, leaseId }));
      const op = b.r.body.operation;
      // Cut to the millisecond on the way out: allow 1 ms below the bracket.
      expect(ms(op.createdAt)).toBeGreaterThanOrEqual(Math.floor(b.before) - 1);
      expect(ms(op.createdAt)).toBeLessThanOrEqual(b.after);
      expect(ms(b.r.body.lease.expiresAt) - ms(op.createdAt)).toBe(10_000);

      const h = await timed(() => api[name].heartbeat(key, leaseId, 20_000));
      const renewed = ms(h.r.body.lease.expiresAt);
      expect(renewed).toBeGreaterThanOrEqual(Math.floor(h.before) + 20_000 - 1);
      expect(renewed).toBeLessThanOrEqual(h.after + 20_000);

      const c = await timed(() => api[name].complete(key, leaseId, 'succeeded', { n: 4 }));
      const done = c.r.body.operation;
      expect(ms(done.completedAt)).toBeGreaterThanOrEqual(Math.floor(c.before) - 1);
      expect(ms(done.completedAt)).toBeLessThanOrEqual(c.after);
      expect(ms(done.retainedUntil) - ms(done.completedAt)).toBe(86_400_000);

      const events = (await api[name].events(key)).body.events as { at: string }[];
      for (const e of events) {
        expect(ms(e.at)).toBeGreaterThanOrEqual(Math.floor(b.before) - 1);
        expect(ms(e.at)).toBeLessThanOrEqual(c.after);
      }
    }
  }, 60_000);

  it('the same script gives the same answers and the same effects on every replica', async () => {
    const answers: Record<string, string[]> = {};
    for (const name of ['exact', 'ahead', 'behind'] as const) {
      const a = api[name];
      const key = `f7/script/${name}/${randomUUID()}`;
      const request = { orderId: 'ORD-7', amount: 30 };
      const leaseId = randomUUID();
      const log: string[] = [];
      const note = (r: RawReply) =>
        log.push(`${r.status} ${r.body.outcome ?? r.body.code ?? r.body.operation?.status}`);
      const b = await a.begin({ key, request, effect: 'non_idempotent_write', leaseId });
      note(b);
      if (b.body.outcome === 'acquired')
        await downstream.perform({ key, attempt: 1, leaseId, worker: name, value: 1 });
      note(await a.begin({ key, request, leaseId: randomUUID() })); // someone else
      note(await a.begin({ key, request, leaseId })); // a lost begin, retried
      note(await a.complete(key, leaseId, 'succeeded', { ticket: 'T-7' }));
      note(await a.complete(key, leaseId, 'succeeded', { ticket: 'T-7' })); // repeated
      note(await a.complete(key, leaseId, 'succeeded', { ticket: 'T-8' })); // another result
      note(await a.begin({ key, request })); // replay
      note(await a.begin({ key, request: { ...request, amount: 31 } })); // key reused
      const u = `${key}/unknown`;
      const ub = await a.begin({ key: u, request, effect: 'non_idempotent_write' });
      note(ub);
      note(await a.unknown(u, ub.body.lease.id));
      note(await a.begin({ key: u, request }));
      answers[name] = log;
      expect(downstream.count(key)).toBe(1);
    }
    expect(answers.exact).toEqual([
      '201 acquired',
      '409 OPERATION_IN_PROGRESS',
      '200 acquired',
      '200 succeeded',
      '200 succeeded',
      '409 RESULT_MISMATCH',
      '200 replayed',
      '422 KEY_REUSED',
      '201 acquired',
      '200 outcome_unknown',
      '409 OUTCOME_UNKNOWN',
    ]);
    expect(answers.ahead).toEqual(answers.exact);
    expect(answers.behind).toEqual(answers.exact);
  }, 60_000);

  it('Retry-After of OPERATION_IN_PROGRESS is the seconds left on the lease, on every replica', async () => {
    const key = `f7/retry-after/${randomUUID()}`;
    const b = await api.exact.begin({ key, request: { n: 5 }, leaseMs: 20_000 });
    expect(b.status).toBe(201);
    const expiresAt = ms(b.body.lease.expiresAt);
    const wrong: string[] = [];
    for (const name of ['exact', 'ahead', 'behind'] as const) {
      const { r, before, after } = await timed(() => api[name].begin({ key, request: { n: 5 } }));
      expect([name, r.status, r.body.code]).toEqual([name, 409, 'OPERATION_IN_PROGRESS']);
      // Contract section 3: `Retry-After` = seconds left on the lease, which the database clock decides.
      const low = Math.max(1, Math.ceil((expiresAt - after) / 1000));
      const high = Math.ceil((expiresAt - before) / 1000);
      const s = Number(r.headers['retry-after']);
      if (!(s >= low && s <= high))
        wrong.push(`${name}: Retry-After ${r.headers['retry-after']}, lease has ${low}-${high} s left`);
    }
    expect(wrong).toEqual([]);
  }, 30_000);
});
