/**
 * Drill F3: lost responses. A TCP proxy in front of a real service replica (a
 * child process) loses 20% of responses AFTER the request reached the service
 * (reset, close, or truncated). Clients retry with the same key and the same
 * client-chosen `leaseId` until they get an answer, perform the effect at the
 * downstream only when acquired, then complete (retried the same way).
 *
 * Proved by counting at the downstream: effects == unique keys; every key
 * ends `succeeded` at attempt 1 with one `created` and one `completed` event;
 * a retried begin returns the same lease and bytes; replays of a completed
 * key are byte-identical across retries and workers.
 *
 * 1,000 operations: 800 keys, plus 200 second deliveries of those keys by
 * another worker with its own lease id (a duplicate message), interleaved
 * with the originals so many of them race. Not scaled down: about 4,900
 * connections, ~1,000 of them lost, took 67-75 s of test time on a 2-core box
 * that other test runs kept at load 12 (122 s at load 17); the work itself is
 * a few thousand small requests.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onPostgres } from '../support/engine.js';
import { Downstream } from './support/downstream.js';
import { LossyProxy } from './support/lossy-proxy.js';
import { ledger, type RawReply, rng, TransportError } from './support/raw-http.js';
import { Replica, sleep } from './support/replica.js';

const KEYS = 800;
const DUPLICATES = 200;
const CONCURRENCY = 32;
const DROP_RATE = 0.2;
const SEED = Number(process.env.IDEM_DRILL_SEED ?? Date.now() % 1_000_000);

interface Op {
  key: string;
  worker: string;
  leaseId: string;
  request: Record<string, unknown>;
}

// The service child process needs a real database URL reachable from another
// process, and the drill needs a second process at all: Postgres only.
describe.skipIf(!onPostgres())(
  'F3 lost responses (proxy drops 20% of answers after the service handled them)',
  () => {
    let testDb: TestDatabase;
    let replica: Replica;
    let proxy: LossyProxy;
    const downstream = new Downstream();

    beforeAll(async () => {
      testDb = await createTestDatabase();
      replica = new Replica({ name: 'f3-replica', databaseUrl: testDb.url! });
      await Promise.all([replica.start(), downstream.start()]);
      proxy = new LossyProxy(replica.port, DROP_RATE, rng(SEED));
      await proxy.listen();
    }, 120_000);

    afterAll(async () => {
      await proxy?.close();
      await replica?.stop();
      await downstream.close();
      await testDb?.drop();
    }, 60_000);

    it('1,000 operations: effects == unique keys, retried begins and completes answer the same, replays byte-identical', async () => {
      const run = randomUUID().slice(0, 8);
      const viaProxy = ledger(() => proxy.url);
      const direct = ledger(() => replica.url);

      // Originals, with each duplicate placed shortly after its original.
      const random = rng(SEED + 1);
      const ops: Op[] = [];
      const keys: string[] = [];
      for (let i = 0; i < KEYS; i++) {
        const key = `f3/${run}/order-${i}`;
        keys.push(key);
        ops.push({
          key,
          worker: `w-${i}`,
          leaseId: randomUUID(),
          request: { orderId: `ORD-${i}`, amount: i % 97 },
        });
      }
      for (let d = 0; d < DUPLICATES; d++) {
        const i = Math.floor(random() * KEYS);
        const at = Math.min(
          ops.length,
          ops.findIndex((o) => o.key === keys[i]) + 1 + Math.floor(random() * 40),
        );
        ops.splice(at, 0, {
          ...ops.find((o) => o.key === keys[i])!,
          worker: `dup-${d}`,
          leaseId: randomUUID(),
        });
      }
      expect(ops).toHaveLength(KEYS + DUPLICATES);

      const lostBy: Record<string, number> = {};
      const unexpected: string[] = [];
      let unavailable = 0;
      let inProgressWaits = 0;
      /** Resends the same request until an HTTP answer arrives; a 503 is retried too. */
      async function untilAnswer(what: string, call: () => Promise<RawReply>): Promise<RawReply> {
        for (let i = 0; i < 500; i++) {
          try {
            const r = await call();
            if (r.status !== 503) return r;
            unavailable++;
          } catch (err) {
            if (!(err instanceof TransportError)) throw err;
            lostBy[what] = (lostBy[what] ?? 0) + 1;
          }
          await sleep(5 + Math.random() * 20);
        }
        throw new Error(`${what}: no answer after 500 tries`);
      }

      const acquiredBodies = new Map<string, Set<string>>(); // per worker: every acquired answer
      const completeBodies = new Map<string, Set<string>>(); // per key: every 200 of complete
      const replayBodies = new Map<string, string[]>(); // per key: every replayed begin
      const results = new Map<string, unknown>(); // per key: the result its acquirer stored
      const add = <T>(m: Map<string, Set<T>>, k: string, v: T) => m.set(k, (m.get(k) ?? new Set()).add(v));

      async function replay(op: Op): Promise<void> {
        const r = await untilAnswer('replay', () =>
          viaProxy.begin({ key: op.key, request: op.request, leaseId: op.leaseId }),
        );
        if (
          r.status !== 200 ||
          r.body.outcome !== 'replayed' ||
          r.headers['idempotent-replayed'] !== 'true'
        ) {
          unexpected.push(`${op.key} replay: ${r.status} ${r.raw.slice(0, 200)}`);
          return;
        }
        replayBodies.set(op.key, [...(replayBodies.get(op.key) ?? []), r.raw]);
      }

      async function runOne(op: Op): Promise<void> {
        const beginBody = {
          key: op.key,
          request: op.request,
          effect: 'non_idempotent_write',
          leaseId: op.leaseId,
          owner: op.worker,
        };
        let lease: { id: string; attempt: number } | undefined;
        for (;;) {
          const r = await untilAnswer('begin', () => viaProxy.begin(beginBody));
          if ((r.status === 201 || r.status === 200) && r.body.outcome === 'acquired') {
            add(acquiredBodies, op.worker, r.raw);
            lease = r.body.lease;
            break;
          }
          if (r.status === 200 && r.body.outcome === 'replayed') {
            replayBodies.set(op.key, [...(replayBodies.get(op.key) ?? []), r.raw]);
            break;
          }
          if (r.status === 409 && r.body.code === 'OPERATION_IN_PROGRESS') {
            inProgressWaits++; // the other delivery holds it: ask again shortly
            await sleep(50);
            continue;
          }
          unexpected.push(`${op.key} begin by ${op.worker}: ${r.status} ${r.raw.slice(0, 200)}`);
          return;
        }
        if (lease) {
          expect(lease.id).toBe(op.leaseId);
          // The side effect, only after an acquisition this worker saw.
          await downstream.perform({
            key: op.key,
            attempt: lease.attempt,
            leaseId: op.leaseId,
            worker: op.worker,
            value: op.key,
          });
          const result = { ticket: `T-${op.key}`, by: op.worker };
          results.set(op.key, result);
          const c = await untilAnswer('complete', () =>
            viaProxy.complete(op.key, op.leaseId, 'succeeded', result),
          );
          if (c.status !== 200) {
            unexpected.push(`${op.key} complete by ${op.worker}: ${c.status} ${c.raw.slice(0, 200)}`);
            return;
          }
          add(completeBodies, op.key, c.raw);
        }
        await replay(op);
        await replay(op);
      }

      const started = performance.now();
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < ops.length) await runOne(ops[next++]!);
        }),
      );
      const seconds = (performance.now() - started) / 1000;

      const s = proxy.stats;
      const dropped = s.dropped.reset + s.dropped.close + s.dropped.truncate;
      console.log(
        `[F3] seed ${SEED}: ${ops.length} operations on ${KEYS} keys in ${seconds.toFixed(1)} s; ` +
          `${s.connections} connections, ${dropped} responses lost after the service handled them ` +
          `(${JSON.stringify(s.dropped)}, by endpoint ${JSON.stringify(s.droppedBy)}); ` +
          `client retries after a lost response ${JSON.stringify(lostBy)}, 503s ${unavailable}, ` +
          `OPERATION_IN_PROGRESS waits ${inProgressWaits}; effects ${downstream.total()}`,
      );

      expect(unexpected).toEqual([]);
      // The drill had teeth: about 20% of answers were lost, begins and completes among them.
      expect(dropped / s.connections).toBeGreaterThan(0.15);
      expect(dropped / s.connections).toBeLessThan(0.25);
      expect(s.droppedBy['POST begin']).toBeGreaterThan(0);
      expect(s.droppedBy['POST complete']).toBeGreaterThan(0);

      // Effects counted downstream: exactly one per unique key.
      expect(downstream.total()).toBe(KEYS);
      expect(keys.filter((k) => downstream.count(k) !== 1)).toEqual([]);

      // A retried begin (same leaseId) answered the very same lease and operation: one body per worker.
      for (const [worker, bodies] of acquiredBodies) expect([worker, bodies.size]).toEqual([worker, 1]);
      expect(acquiredBodies.size).toBe(KEYS);
      // A retried complete answered the same bytes.
      for (const [key, bodies] of completeBodies) expect([key, bodies.size]).toEqual([key, 1]);

      for (const key of keys) {
        const replays = replayBodies.get(key) ?? [];
        // Every worker of the key replayed at least twice; all replays are the same bytes.
        expect(replays.length).toBeGreaterThanOrEqual(2);
        expect(new Set(replays).size, key).toBe(1);
        const replayed = JSON.parse(replays[0]!);
        // ...and they carry the completion's operation and result.
        const completed = JSON.parse([...completeBodies.get(key)!][0]!);
        expect(replayed.operation).toEqual(completed.operation);
        expect(replayed.operation).toMatchObject({
          status: 'succeeded',
          attempt: 1,
          result: results.get(key),
        });
      }

      // The ledger itself, read directly (not through the proxy) and in its tables.
      const sample = keys.filter((_, i) => i % 40 === 0);
      for (const key of sample) {
        const g = await direct.get(key);
        expect(g.status).toBe(200);
        expect(g.body.operation).toMatchObject({ status: 'succeeded', attempt: 1, result: results.get(key) });
      }
      const rows = await testDb.db.rows<{
        key: string;
        status: string;
        attempt: number;
        types: string[];
      }>(sql`
      SELECT o.key, o.status, o.attempt, array_agg(e.type ORDER BY e.version) AS types
      FROM idem_operations o JOIN idem_events e ON e.scope = o.scope AND e.operation_id = o.id
      WHERE o.key LIKE ${`f3/${run}/%`} GROUP BY o.scope, o.key, o.status, o.attempt`);
      expect(rows).toHaveLength(KEYS);
      const odd = rows.filter(
        (r) => r.status !== 'succeeded' || r.attempt !== 1 || r.types.join(',') !== 'created,completed',
      );
      expect(odd).toEqual([]);
    }, 240_000);
  },
);
