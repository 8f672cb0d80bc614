/**
 * Drill F6: a paused holder. The first holder (its own process,
 * `paused-holder-worker.ts`) holds a 2 s lease on an idempotent write and
 * heartbeats it past its first term; we SIGSTOP it for 5 s (a GC pause, a
 * frozen VM) right after a renewal. A second
 * worker, on another replica, takes the operation over once the database
 * says the lease expired (begin -> acquired, `recovered: true`, attempt 2),
 * re-runs the idempotent effect and completes. Then the first holder resumes
 * and completes: 409 `LEASE_LOST`, and nothing changes: the stored result is
 * the second worker's, the row is byte-identical, and the refusal is recorded
 * as `stale_completion_rejected`.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase, type TestDatabase } from '../support/db.js';
import { onPostgres } from '../support/engine.js';
import { type RunningService, startService } from '../support/service.js';
import { Downstream } from './support/downstream.js';
import { ledger } from './support/raw-http.js';
import { ROOT, sleep } from './support/replica.js';

// biome-ignore lint/suspicious/noExplicitAny: JSON lines from the holder process
type HolderEvent = Record<string, any>;

/** The process state letter from /proc: `T` is stopped. */
const procState = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]![0];

// Two service replicas on one database, and a holder in another process: Postgres only.
describe.skipIf(!onPostgres())('F6 paused holder', () => {
  let testDb: TestDatabase;
  let first: RunningService; // the replica the paused holder talks to
  let second: RunningService; // the replica of the worker that takes over
  let holder: ChildProcess | undefined;
  const downstream = new Downstream();

  beforeAll(async () => {
    testDb = await createTestDatabase();
    first = await startService({ testDb });
    second = await startService({ testDb });
    await downstream.start();
  }, 60_000);

  afterAll(async () => {
    holder?.kill('SIGKILL');
    await first?.close();
    await second?.close();
    await downstream.close();
    await testDb?.drop();
  });

  it('SIGSTOP 5 s: a second worker takes over (recovered), the resumed holder gets LEASE_LOST and changes nothing', async () => {
    const key = `doc-7/save/${randomUUID()}`;
    const events: HolderEvent[] = [];
    holder = spawn(process.execPath, ['--import', 'tsx', 'test/drills/paused-holder-worker.ts'], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_OPTIONS: '',
        IDEM_URL: first.url,
        DOWNSTREAM_URL: downstream.url,
        KEY: key,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: false,
    });
    let stderr = '';
    holder.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    let buffered = '';
    holder.stdout!.on('data', (c: Buffer) => {
      buffered += c.toString();
      const lines = buffered.split('\n');
      buffered = lines.pop()!;
      for (const l of lines) if (l) events.push(JSON.parse(l));
    });
    const exited = new Promise<number | null>((r) => holder!.once('exit', (code) => r(code)));
    const waitFor = async (match: (e: HolderEvent) => boolean, what: string, timeoutMs: number) => {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const e = events.find((x) => match(x) || x.event === 'failed');
        if (e) return e;
        if (Date.now() > deadline) throw new Error(`holder: no ${what} in ${timeoutMs} ms\n${stderr}`);
        await sleep(20);
      }
    };

    const holding = await waitFor((e) => e.event === 'holding', 'holding', 60_000);
    expect(holding).toMatchObject({ event: 'holding', attempt: 1 });
    const pid = holder.pid!;
    expect(downstream.applications.get(key)?.map((a) => a.worker)).toEqual(['holder-1']);

    // Pause it right after a heartbeat sent past the lease's first term renewed it: the
    // heartbeats are what keeps the 2 s lease alive, and it is paused while holding it.
    const firstTerm = new Date(holding.lease.expiresAt).getTime();
    const beat = await waitFor(
      (e) => e.event === 'heartbeat' && (e.status !== 200 || e.sentAt > firstTerm),
      'heartbeat after the first term',
      30_000,
    );
    expect(beat, 'the holder kept its 2 s lease by heartbeats until the pause').toMatchObject({
      event: 'heartbeat',
      status: 200,
    });
    holder.kill('SIGSTOP');
    const stoppedAt = Date.now();
    await sleep(50);
    expect(procState(pid)).toBe('T');
    const lastBeat = events.filter((e) => e.event === 'heartbeat' && e.status === 200).at(-1)!;
    expect(events.filter((e) => e.event === 'heartbeat' && e.status !== 200)).toEqual([]);

    const worker = ledger(() => second.url);
    const leaseId = randomUUID();
    const request = { document: 'doc-7', title: 'Quarterly report' };
    // The second worker asks until the database says the lease ran out, then takes over.
    let refusals = 0;
    let takeover: Awaited<ReturnType<typeof worker.begin>>;
    for (;;) {
      takeover = await worker.begin({ key, request, effect: 'idempotent_write', leaseId, owner: 'worker-2' });
      if (takeover.status !== 409) break;
      expect(takeover.body.code).toBe('OPERATION_IN_PROGRESS');
      refusals++;
      expect(Date.now() - stoppedAt).toBeLessThan(4500);
      await sleep(100);
    }
    expect(refusals).toBeGreaterThan(0); // it was paused while its lease was live
    expect(takeover.status).toBe(200);
    expect(takeover.body).toMatchObject({
      outcome: 'acquired',
      recovered: true,
      lease: { id: leaseId, attempt: 2 },
      operation: { status: 'in_progress', attempt: 2 },
    });
    // Not before the lease's last expiry as the holder's last heartbeat set it (database clock).
    const acquiredAt = (
      await testDb.db.rows<{ at: number }>(sql`SELECT (extract(epoch FROM e.at) * 1000)::float8 AS at
        FROM idem_events e JOIN idem_operations o ON o.scope = e.scope AND o.id = e.operation_id
        WHERE o.key = ${key} AND e.type = 'acquired'`)
    )[0]!.at;
    expect(acquiredAt).toBeGreaterThanOrEqual(new Date(lastBeat.expiresAt).getTime());

    // The idempotent effect again, then complete.
    await downstream.perform({
      key,
      attempt: 2,
      leaseId,
      worker: 'worker-2',
      value: { title: 'Quarterly report' },
    });
    const done = await worker.complete(key, leaseId, 'succeeded', { by: 'worker-2', attempt: 2 });
    expect(done.status).toBe(200);
    const before = await worker.get(key);
    const rowBefore = await testDb.db.rows(sql`SELECT * FROM idem_operations WHERE key = ${key}`);

    // Resume after 5 s stopped, and let the holder complete.
    await sleep(Math.max(0, 5000 - (Date.now() - stoppedAt)));
    expect(procState(pid)).toBe('T');
    const pausedMs = Date.now() - stoppedAt;
    const resumedAt = Date.now();
    holder.kill('SIGCONT');
    holder.kill('SIGUSR2');
    const late = await waitFor((e) => e.event === 'complete', 'complete', 30_000);
    expect(await exited).toBe(0);
    console.log(
      `[F6] holder paused ${pausedMs} ms; second worker refused ${refusals}x while the lease was live, ` +
        `took over ${(acquiredAt - new Date(lastBeat.expiresAt).getTime()).toFixed(0)} ms after it expired; ` +
        `stale complete -> ${late.status} ${late.code}; effects ${downstream.count(key)}`,
    );

    expect(late).toMatchObject({ event: 'complete', status: 409, code: 'LEASE_LOST' });
    expect(JSON.parse(late.raw).operation).toMatchObject({
      status: 'succeeded',
      result: { by: 'worker-2', attempt: 2 },
    });
    // Heartbeats the holder sent after it resumed were refused too (one sent before the pause
    // may have its answer read only after it: that one was answered while the lease was live).
    const afterResume = events.filter((e) => e.event === 'heartbeat' && e.sentAt >= resumedAt);
    expect(afterResume.filter((e) => !(e.status === 409 && e.code === 'LEASE_LOST'))).toEqual([]);

    // Nothing changed: the same bytes, the same row (version included), the second worker's result.
    const after = await worker.get(key);
    expect(after.raw).toBe(before.raw);
    expect(await testDb.db.rows(sql`SELECT * FROM idem_operations WHERE key = ${key}`)).toEqual(rowBefore);
    expect(after.body.operation).toMatchObject({
      status: 'succeeded',
      attempt: 2,
      result: { by: 'worker-2', attempt: 2 },
    });

    const log = (await worker.events(key)).body.events as {
      type: string;
      attempt: number;
      detail: Record<string, unknown>;
    }[];
    expect(log.map((e) => e.type)).toEqual([
      'created',
      'dispatched',
      'acquired',
      'completed',
      'stale_completion_rejected',
    ]);
    expect(log[2]!.detail.recovered).toBe(true);
    expect(log.filter((e) => e.type === 'completed' || e.type === 'late_completion')).toHaveLength(1);

    // The downstream: one application per holder, the second by attempt 2; the same state either way.
    const apps = downstream.applications.get(key)!;
    expect(apps.map((a) => [a.worker, a.attempt])).toEqual([
      ['holder-1', 1],
      ['worker-2', 2],
    ]);
    expect(downstream.values.get(key)).toEqual({ title: 'Quarterly report' });
  }, 120_000);
});
