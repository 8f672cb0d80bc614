/**
 * Drills F1 and F2 (docs/drills.md) and fencing under races: many begins on one key
 * from three service replicas, each with its own pool, on ONE database.
 *
 * Postgres only: the embedded engine (PGlite) is one process that serialises
 * every query, so requests "in parallel" there never race inside the database,
 * and it cannot host a second replica (`openAnother` throws). What these tests
 * prove (one atomic INSERT ... ON CONFLICT, guarded UPDATEs under row locks)
 * needs real concurrent connections on a real server.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres } from '../support/engine.js';
import { client, type Reply } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

type Api = ReturnType<typeof client>;

/** Runs `fn` over `items`, `size` at a time: races within a group, groups one after another. */
async function inGroups<T>(items: T[], size: number, fn: (item: T, index: number) => Promise<void>) {
  for (let i = 0; i < items.length; i += size) {
    await Promise.all(items.slice(i, i + size).map((item, j) => fn(item, i + j)));
  }
}

describe.skipIf(!onPostgres())('concurrency across three replicas on one database', () => {
  let first: TestApp;
  let replicas: TestApp[];
  let apis: Api[];

  beforeAll(async () => {
    // All three replicas share this test worker's one event loop, on a 2-core
    // machine that CI shares with other test files: give a request up to 15 s
    // to get a pooled connection (the default 2 s fail-fast is drill F10's
    // subject, tested in unavailable.test.ts), so what is measured here is the
    // database's atomicity, not this process's CPU.
    const dbSettings = { connectTimeoutMs: 15_000 };
    first = await createTestApp({ dbSettings });
    const second = await createTestApp({ testDb: first.testDb, dbSettings });
    const third = await createTestApp({ testDb: first.testDb, dbSettings });
    replicas = [first, second, third];
    apis = replicas.map((r) => client(r.app));
    // Open every pool's connections up front (10 each): connection set-up is
    // not what these tests measure, and under a loaded machine it can take
    // longer than the pool's connect timeout.
    await Promise.all(
      replicas.flatMap((r) => Array.from({ length: 10 }, () => r.db.rows(sql`SELECT pg_sleep(0.05)`))),
    );
  });
  afterAll(async () => {
    // The replicas first: they share the first one's database, which it drops.
    for (const r of replicas.slice(1)) await r.close();
    await first.close();
  });

  /** One line per unexpected answer, so a failure says what happened. */
  const describeReply = (r: Reply) => `${r.status} ${r.body?.code ?? r.body?.outcome ?? ''}`;

  async function eventCounts(prefix: string): Promise<Map<string, Record<string, number>>> {
    const rows = await first.db.rows<{ key: string; type: string; n: number }>(
      sql`SELECT key, type, count(*)::int AS n FROM idem_events
          WHERE scope = 'orders' AND key LIKE ${`${prefix}%`} GROUP BY key, type`,
    );
    const out = new Map<string, Record<string, number>>();
    for (const r of rows) out.set(r.key, { ...out.get(r.key), [r.type]: r.n });
    return out;
  }

  it('F1: 64 concurrent begins on each of 200 fresh keys: exactly one acquired per key', async () => {
    const KEYS = 200;
    const PER_KEY = 64;
    // Keys in flight at once: 4 x 64 = 256 requests over 3 pools of 10. The
    // race is within a key. Begins on one key queue on its row lock (one
    // commit each), so keys in parallel is what makes this finish.
    const KEYS_AT_ONCE = 4;
    const prefix = `f1/${randomUUID()}/`;
    const keys = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
    const answers = new Map<string, Reply[]>();

    for (let i = 0; i < keys.length; i += KEYS_AT_ONCE) {
      const batch = keys.slice(i, i + KEYS_AT_ONCE);
      await Promise.all(
        batch.flatMap((key, ki) =>
          Array.from({ length: PER_KEY }, async (_, j) => {
            const r = await apis[(ki + j) % apis.length]!.begin({
              key,
              request: { key, amount: 30 },
              effect: 'non_idempotent_write',
            });
            const list = answers.get(key) ?? [];
            list.push(r);
            answers.set(key, list);
          }),
        ),
      );
    }

    // Safety first: never two holders, never two creations, nothing half-written.
    const unsafe: string[] = [];
    // Then liveness: every key acquired once, every other begin told "in progress", no 5xx.
    const unanswered: string[] = [];
    const acquiredKeys = new Set<string>();
    for (const key of keys) {
      const list = answers.get(key)!;
      expect(list).toHaveLength(PER_KEY);
      const acquired = list.filter((r) => r.status === 201 && r.body.outcome === 'acquired');
      const inProgress = list.filter((r) => r.status === 409 && r.body.code === 'OPERATION_IN_PROGRESS');
      const other = list.filter((r) => !acquired.includes(r) && !inProgress.includes(r));
      if (acquired.length > 1) unsafe.push(`${key}: ${acquired.length} begins acquired`);
      if (acquired.length === 1) acquiredKeys.add(key);
      if (acquired.length !== 1 || other.length > 0) {
        const tally = new Map<string, number>();
        for (const r of other) tally.set(describeReply(r), (tally.get(describeReply(r)) ?? 0) + 1);
        unanswered.push(
          `${key}: ${acquired.length} acquired; others: ${[...tally].map(([w, n]) => `${n} x ${w}`).join(', ') || 'none'}`,
        );
      }
      for (const r of inProgress) {
        expect(r.body.retryable).toBe(true);
        expect(r.headers['content-type']).toContain('application/problem+json');
        expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
      }
    }
    expect(unsafe).toEqual([]);

    // The database agrees: a row (attempt 1) and exactly one `created` event, and
    // nothing else, for each key a begin acquired; nothing at all for any other.
    const rows = await first.db.rows<{ key: string; attempt: number; status: string }>(
      sql`SELECT key, attempt, status FROM idem_operations WHERE scope = 'orders' AND key LIKE ${`${prefix}%`}`,
    );
    expect(rows.map((r) => r.key).sort()).toEqual([...acquiredKeys].sort());
    expect(rows.filter((r) => r.attempt !== 1 || r.status !== 'in_progress')).toEqual([]);
    const events = await eventCounts(prefix);
    expect([...events.keys()].sort()).toEqual([...acquiredKeys].sort());
    for (const key of acquiredKeys) expect(events.get(key), key).toEqual({ created: 1 });

    // Any 5xx is in here: it is neither acquired nor in progress.
    expect(unanswered).toEqual([]);
    expect(acquiredKeys.size).toBe(KEYS);
  }, 180_000);

  it('F2: the same key with different arguments, racing: one runs, the rest are refused', async () => {
    const KEYS = 50;
    const PER_KEY = 32;
    const prefix = `f2/${randomUUID()}/`;
    const keys = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
    const problems: string[] = [];
    for (let i = 0; i < keys.length; i += 4) {
      await Promise.all(
        keys.slice(i, i + 4).map(async (key) => {
          const answers = await Promise.all(
            Array.from({ length: PER_KEY }, async (_, j) => {
              const amount = j % 2 ? 30 : 300;
              const r = await apis[j % apis.length]!.begin({ key, request: { orderId: key, amount } });
              return { amount, r };
            }),
          );
          const winners = answers.filter((a) => a.r.status === 201);
          if (winners.length !== 1) {
            problems.push(`${key}: ${winners.length} winners: ${answers.map((a) => describeReply(a.r))}`);
            return;
          }
          const winner = winners[0]!;
          expect(winner.r.body.outcome).toBe('acquired');
          for (const a of answers) {
            if (a === winner) continue;
            const expected =
              a.amount === winner.amount ? [409, 'OPERATION_IN_PROGRESS'] : [422, 'KEY_REUSED'];
            if (a.r.status !== expected[0] || a.r.body.code !== expected[1]) {
              problems.push(
                `${key}: amount ${a.amount} got ${describeReply(a.r)}, expected ${expected.join(' ')}`,
              );
            }
          }
          // What is stored is the winner's request, and nothing else was written.
          const g = await apis[0]!.get(key);
          expect(g.status, g.raw).toBe(200);
          expect(g.body.operation.request).toEqual({ orderId: key, amount: winner.amount });
          expect(g.body.operation.fingerprint).toBe(winner.r.body.operation.fingerprint);
        }),
      );
    }
    expect(problems).toEqual([]);
    const events = await eventCounts(prefix);
    for (const key of keys) expect(events.get(key), key).toEqual({ created: 1 });
  });

  /**
   * A holder whose lease just expired reports while other workers begin the
   * same (idempotent) operation. Either the holder's complete lands first (it
   * is expired but not superseded: accepted, and every begin replays it), or a
   * begin takes the operation over first (the holder then gets LEASE_LOST).
   * Never both, and never two completions.
   */
  it('fencing: an expired holder completing races begins that would recover it', async () => {
    const KEYS = 100;
    const BEGINS = 3;
    const prefix = `fence/${randomUUID()}/`;
    const keys = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
    const holders = new Map<string, string>();
    await inGroups(keys, 20, async (key, i) => {
      const r = await apis[i % 3]!.begin({ key, request: { key }, effect: 'idempotent_write' });
      expect(r.status).toBe(201);
      holders.set(key, r.body.lease.id);
    });
    await first.db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '1 millisecond'
      WHERE scope = 'orders' AND key LIKE ${`${prefix}%`}`);

    const problems: string[] = [];
    let holderWon = 0;
    let takenOver = 0;
    // 10 keys at a time: 40 requests in flight, each key a race of four.
    await inGroups(keys, 10, async (key, i) => {
      const leaseA = holders.get(key)!;
      const [done, ...begins] = await Promise.all([
        apis[i % 3]!.complete(key, leaseA, 'succeeded', { by: 'A' }),
        ...Array.from({ length: BEGINS }, (_, j) => apis[(i + j + 1) % 3]!.begin({ key, request: { key } })),
      ]);
      const acquired = begins.filter((b) => b.status === 200 && b.body.outcome === 'acquired');
      if (done!.status === 200) {
        holderWon++;
        if (acquired.length > 0) problems.push(`${key}: holder completed AND a begin acquired`);
        for (const b of begins) {
          if (b.status !== 200 || b.body.outcome !== 'replayed' || b.body.operation.result?.by !== 'A') {
            problems.push(`${key}: after the holder's completion a begin got ${describeReply(b)}`);
          }
        }
        return;
      }
      if (done!.status !== 409 || done!.body.code !== 'LEASE_LOST') {
        problems.push(`${key}: the holder's complete got ${describeReply(done!)}`);
        return;
      }
      takenOver++;
      if (acquired.length !== 1) {
        problems.push(
          `${key}: holder refused, ${acquired.length} begins acquired: ${begins.map(describeReply)}`,
        );
        return;
      }
      const b = acquired[0]!;
      expect(b.body).toMatchObject({ recovered: true, lease: { attempt: 2 } });
      for (const other of begins) {
        if (other !== b && (other.status !== 409 || other.body.code !== 'OPERATION_IN_PROGRESS')) {
          problems.push(`${key}: a losing begin got ${describeReply(other)}`);
        }
      }
      // The old holder and the new one report at the same moment: only the new one counts.
      const [late, mine] = await Promise.all([
        apis[i % 3]!.complete(key, leaseA, 'succeeded', { by: 'A' }),
        apis[(i + 1) % 3]!.complete(key, b.body.lease.id, 'succeeded', { by: 'B' }),
      ]);
      if (late.status !== 409 || late.body.code !== 'LEASE_LOST') {
        problems.push(`${key}: the superseded holder's second complete got ${describeReply(late)}`);
      }
      if (mine.status !== 200)
        problems.push(`${key}: the current holder's complete got ${describeReply(mine)}`);
    });
    expect(problems).toEqual([]);
    expect(holderWon + takenOver).toBe(KEYS);

    const rows = await first.db.rows<{ key: string; status: string; attempt: number; by: string }>(
      sql`SELECT key, status, attempt, result->>'by' AS by FROM idem_operations
          WHERE scope = 'orders' AND key LIKE ${`${prefix}%`}`,
    );
    expect(rows).toHaveLength(KEYS);
    const events = await eventCounts(prefix);
    for (const r of rows) {
      expect(r.status, r.key).toBe('succeeded');
      // The fencing number says who completed: attempt 1 is A, attempt 2 is B.
      expect(r.by, r.key).toBe(r.attempt === 1 ? 'A' : 'B');
      const e = events.get(r.key)!;
      expect((e.completed ?? 0) + (e.late_completion ?? 0), r.key).toBe(1);
      expect(e.acquired ?? 0, r.key).toBe(r.attempt - 1);
      expect(e.stale_completion_rejected ?? 0, r.key).toBe(r.attempt === 1 ? 0 : 2);
    }
  });

  it('fencing: a late completion of a non-idempotent call races begins: it always lands, nothing re-runs it', async () => {
    const KEYS = 100;
    const prefix = `late/${randomUUID()}/`;
    const keys = Array.from({ length: KEYS }, (_, i) => `${prefix}${i}`);
    const holders = new Map<string, string>();
    await inGroups(keys, 20, async (key, i) => {
      const r = await apis[i % 3]!.begin({ key, request: { key }, effect: 'non_idempotent_write' });
      expect(r.status).toBe(201);
      holders.set(key, r.body.lease.id);
    });
    await first.db.rows(sql`UPDATE idem_operations SET lease_expires_at = now() - interval '1 millisecond'
      WHERE scope = 'orders' AND key LIKE ${`${prefix}%`}`);

    const problems: string[] = [];
    await inGroups(keys, 10, async (key, i) => {
      const [done, ...begins] = await Promise.all([
        apis[i % 3]!.complete(key, holders.get(key)!, 'failed', { declined: true }),
        apis[(i + 1) % 3]!.begin({ key, request: { key } }),
        apis[(i + 2) % 3]!.begin({ key, request: { key } }),
      ]);
      if (done!.status !== 200) problems.push(`${key}: late complete got ${describeReply(done!)}`);
      for (const b of begins) {
        const ok =
          (b.status === 409 && b.body.code === 'OUTCOME_UNKNOWN') ||
          (b.status === 200 && b.body.outcome === 'replayed');
        if (!ok) problems.push(`${key}: a begin got ${describeReply(b)}`);
      }
    });
    expect(problems).toEqual([]);
    const events = await eventCounts(prefix);
    for (const key of keys) {
      const e = events.get(key)!;
      expect(e.late_completion, key).toBe(1);
      expect(e.completed ?? 0, key).toBe(0);
      expect(e.acquired ?? 0, key).toBe(0);
      expect(e.lease_expired ?? 0, key).toBeLessThanOrEqual(1);
    }
    const rows = await first.db.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM idem_operations
          WHERE scope = 'orders' AND key LIKE ${`${prefix}%`} AND status = 'failed' AND attempt = 1`,
    );
    expect(rows[0]!.n).toBe(KEYS);
  });
});
