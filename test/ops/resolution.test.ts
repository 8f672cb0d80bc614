/**
 * Resolution (contract section 2; issue 3 item 3): an operator resolves
 * `outcome_unknown` (or in_progress with an expired lease) to succeeded,
 * failed or ready, with a note and optional compare-and-set on the attempt;
 * and the races: two operators at once, and a late completion against a
 * resolution. One wins, the other gets a clear 409, the events tell the story.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { onPostgres } from '../support/engine.js';
import { client, expireLease, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

const SCOPE = 'shipping';
const keys: ApiKey[] = [
  { name: 'worker', role: 'client', scopes: [SCOPE], sha256: hashSecret('worker-secret') },
  { name: 'alice', role: 'operator', scopes: [SCOPE], sha256: hashSecret('alice-secret') },
  { name: 'bob', role: 'operator', scopes: [SCOPE], sha256: hashSecret('bob-secret') },
];

type Api = ReturnType<typeof client>;
let t: TestApp;
/** A second replica on the same database (Postgres only), so races cross pools. */
let replica: TestApp | undefined;
let worker: Api;
let alice: Api;
let bob: Api;
beforeAll(async () => {
  t = await createTestApp({ keys });
  worker = client(t.app, SCOPE, 'worker-secret');
  alice = client(t.app, SCOPE, 'alice-secret');
  if (onPostgres()) {
    replica = await createTestApp({ keys, testDb: t.testDb });
    bob = client(replica.app, SCOPE, 'bob-secret');
  } else {
    bob = client(t.app, SCOPE, 'bob-secret');
  }
}, SETUP_MS);
afterAll(async () => {
  await replica?.close();
  await t.close();
});

const ROUNDS = onPostgres() ? 25 : 8;
const REQ = { parcel: 'P-77', to: 'Lyon' };
const k = () => `ship/${randomUUID()}`;
const rowOf = async (key: string) => (await snapshot(t.db)).find((r) => r.key === key);
const events = async (key: string) =>
  (await worker.events(key)).body.events as {
    type: string;
    actor: string;
    attempt: number;
    detail: Record<string, unknown>;
  }[];
const types = async (key: string) => (await events(key)).map((e) => e.type);

/** An operation the holder marked outcome_unknown; returns its key and the holder's lease id. */
async function unknownOp(effect = 'non_idempotent_write') {
  const key = k();
  const a = await worker.begin({ key, request: REQ, effect });
  expect(a.status).toBe(201);
  expect((await worker.unknown(key, a.body.lease.id)).status).toBe(200);
  return { key, leaseId: a.body.lease.id as string, id: a.body.operation.id as string };
}

/** A dispatched lease that expired: outcome_unknown by rule A, written by nobody yet. */
async function lapsedOp(effect = 'non_idempotent_write') {
  const key = k();
  const a = await worker.begin({ key, request: REQ, effect });
  await expireLease(t.db, SCOPE, key);
  return { key, leaseId: a.body.lease.id as string, id: a.body.operation.id as string };
}

describe('resolve', () => {
  it('outcome_unknown to succeeded: result stored, resolution recorded, replayed to later begins', async () => {
    const { key } = await unknownOp();
    const r = await alice.resolve(key, {
      status: 'succeeded',
      note: 'carrier confirms pickup',
      result: { tracking: 'TRK-1' },
    });
    expect(r.status).toBe(200);
    expect(r.body.operation).toMatchObject({
      status: 'succeeded',
      result: { tracking: 'TRK-1' },
      attempt: 1,
      resolution: { by: 'alice', note: 'carrier confirms pickup' },
    });
    expect(r.body.operation.completedAt).not.toBeNull();
    expect(r.body.operation.retainedUntil).not.toBeNull();
    expect(r.body.lease).toBeUndefined();
    const b = await worker.begin({ key, request: REQ });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ outcome: 'replayed', operation: { status: 'succeeded' } });
    expect(b.body.operation.result).toEqual({ tracking: 'TRK-1' });
    const ev = await events(key);
    expect(ev.map((e) => [e.type, e.actor])).toEqual([
      ['created', 'worker'],
      ['marked_unknown', 'worker'],
      ['resolved', 'alice'],
    ]);
    expect(ev[2]!.detail).toMatchObject({
      from: 'outcome_unknown',
      to: 'succeeded',
      note: 'carrier confirms pickup',
    });
  });

  it('outcome_unknown to failed: replayed as failed', async () => {
    const { key } = await unknownOp();
    const r = await alice.resolve(key, { status: 'failed', note: 'never left', result: { error: 'lost' } });
    expect(r.status).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'failed', result: { error: 'lost' } });
    const b = await worker.begin({ key, request: REQ });
    expect(b.body).toMatchObject({
      outcome: 'replayed',
      operation: { status: 'failed', result: { error: 'lost' } },
    });
  });

  it('outcome_unknown to ready: the old lease is superseded; the next begin acquires attempt + 1', async () => {
    const { key, leaseId } = await unknownOp();
    const r = await alice.resolve(key, { status: 'ready', note: 'did not happen; run it again' });
    expect(r.status).toBe(200);
    expect(r.body.operation).toMatchObject({ status: 'ready', lease: null, attempt: 1, result: null });
    expect(r.body.operation.resolution.by).toBe('alice');
    const before = await rowOf(key);
    // The last holder is superseded: every holder call is LEASE_LOST and changes nothing.
    for (const call of [
      () => worker.complete(key, leaseId, 'succeeded', { tracking: 'late' }),
      () => worker.release(key, leaseId),
      () => worker.unknown(key, leaseId),
      () => worker.heartbeat(key, leaseId),
      () => worker.dispatch(key, leaseId),
    ]) {
      const x = await call();
      expect(x.status).toBe(409);
      expect(x.body.code).toBe('LEASE_LOST');
    }
    expect(await rowOf(key)).toEqual(before);
    const b = await worker.begin({ key, request: REQ });
    expect(b.status).toBe(200);
    expect(b.body).toMatchObject({ outcome: 'acquired', lease: { attempt: 2 } });
    expect(b.body.lease.id).not.toBe(leaseId);
    // complete, release and unknown from a superseded lease are recorded for operators
    // (contract section 2); heartbeat and dispatch are not reports and leave none.
    expect(await types(key)).toEqual([
      'created',
      'marked_unknown',
      'resolved',
      'stale_completion_rejected',
      'stale_completion_rejected',
      'stale_completion_rejected',
      'acquired',
    ]);
  });

  it('no operator yet: the last holder reporting late records the real outcome (late_completion)', async () => {
    for (const [make, story] of [
      [unknownOp, ['created', 'marked_unknown', 'late_completion']],
      [lapsedOp, ['created', 'lease_expired', 'late_completion']],
    ] as const) {
      const { key, leaseId } = await make();
      expect((await worker.get(key)).body.operation.status).toBe('outcome_unknown');
      const r = await worker.complete(key, leaseId, 'succeeded', { tracking: 'LATE' });
      expect(r.status).toBe(200);
      expect(r.body.operation).toMatchObject({
        status: 'succeeded',
        result: { tracking: 'LATE' },
        resolution: null,
      });
      expect(await types(key)).toEqual(story);
      // An operator arriving after that finds it settled.
      const x = await alice.resolve(key, { status: 'failed', note: 'too late' });
      expect(x.status).toBe(409);
      expect(x.body.code).toBe('INVALID_STATE');
    }
  });

  it('the note is required: missing or empty is 400 INVALID_ARGUMENT naming `note`, nothing changes', async () => {
    const { key } = await unknownOp();
    const before = await rowOf(key);
    for (const body of [{ status: 'succeeded' }, { status: 'ready', note: '' }]) {
      const r = await alice.resolve(key, body);
      expect(r.status).toBe(400);
      expect(r.body).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'note' });
    }
    const bad = await alice.resolve(key, { status: 'rejected', note: 'x' });
    expect(bad.status).toBe(400);
    expect(await rowOf(key)).toEqual(before);
    expect(await types(key)).toEqual(['created', 'marked_unknown']);
  });

  for (const effect of ['read', 'idempotent_write', 'non_idempotent_write', 'unclassified'] as const) {
    it(`in_progress whose dispatched lease expired (${effect}): resolvable`, async () => {
      const { key, leaseId } = await lapsedOp(effect);
      const r = await alice.resolve(key, {
        status: 'succeeded',
        note: 'checked downstream',
        result: { ok: effect },
      });
      expect(r.status).toBe(200);
      expect(r.body.operation).toMatchObject({ status: 'succeeded', result: { ok: effect } });
      // The last holder reporting the same outcome is fine; another is a mismatch.
      expect((await worker.complete(key, leaseId, 'succeeded', { ok: effect })).status).toBe(200);
      const x = await worker.complete(key, leaseId, 'failed', { ok: effect });
      expect(x.status).toBe(409);
      expect(x.body.code).toBe('RESULT_MISMATCH');
      const ev = await types(key);
      expect(ev[ev.length - 2]).toBe('resolved');
      expect(ev[ev.length - 1]).toBe('result_mismatch');
    });
  }

  it('an expired, never-dispatched lease: resolve answers the same before and after the sweeper', async () => {
    // Rule A: it reads as `ready` either way; the sweeper only writes that down.
    const answers: [number, string | undefined][] = [];
    for (const swept of [false, true]) {
      const key = k();
      await worker.begin({ key, request: REQ, effect: 'non_idempotent_write', dispatch: false });
      await expireLease(t.db, SCOPE, key);
      expect((await worker.get(key)).body.operation.status).toBe('ready');
      if (swept) await sweepOnce(t.db, loadConfig({}).sweep);
      const r = await alice.resolve(key, { status: 'succeeded', note: 'n' });
      answers.push([r.status, r.body.code]);
    }
    expect(answers[1]).toEqual(answers[0]);
  });

  it('refused for a live in_progress, pending_approval, released (ready) or terminal operation: 409 INVALID_STATE', async () => {
    const live = k();
    await worker.begin({ key: live, request: REQ, effect: 'non_idempotent_write' });
    const pend = k();
    await worker.begin({ key: pend, request: REQ, requireApproval: true });
    const released = k();
    const rl = await worker.begin({ key: released, request: REQ });
    await worker.release(released, rl.body.lease.id);
    const done = k();
    const d = await worker.begin({ key: done, request: REQ });
    await worker.complete(done, d.body.lease.id, 'succeeded', { tracking: 'T' });
    const resolved = (await unknownOp()).key;
    await alice.resolve(resolved, { status: 'failed', note: 'first' });

    for (const key of [live, pend, released, done, resolved]) {
      const before = await rowOf(key);
      const evBefore = await types(key);
      for (const status of ['succeeded', 'failed', 'ready'] as const) {
        const r = await bob.resolve(key, { status, note: 'try', result: { x: 1 } });
        expect(r.status, `${key} -> ${status}`).toBe(409);
        expect(r.body).toMatchObject({ code: 'INVALID_STATE', retryable: false });
      }
      expect(await rowOf(key)).toEqual(before);
      // Each refusal is on record for operators.
      expect(await types(key)).toEqual([
        ...evBefore,
        'resolution_refused',
        'resolution_refused',
        'resolution_refused',
      ]);
    }
    expect((await bob.resolve(k(), { status: 'ready', note: 'x' })).status).toBe(404);
  });

  it('expectedAttempt: compare-and-set on the fencing number', async () => {
    const { key } = await unknownOp();
    const before = await rowOf(key);
    const stale = await alice.resolve(key, { status: 'ready', note: 'n', expectedAttempt: 2 });
    expect(stale.status).toBe(409);
    expect(stale.body.code).toBe('INVALID_STATE');
    expect(stale.body.operation.attempt).toBe(1);
    expect(await rowOf(key)).toEqual(before);
    const ok = await alice.resolve(key, { status: 'ready', note: 'n', expectedAttempt: 1 });
    expect(ok.status).toBe(200);
    // Run again and lose it again: attempt 2. A resolution decided while looking at attempt 1 is refused.
    const a = await worker.begin({ key, request: REQ });
    expect(a.body.lease.attempt).toBe(2);
    await worker.unknown(key, a.body.lease.id);
    const late = await bob.resolve(key, { status: 'succeeded', note: 'about attempt 1', expectedAttempt: 1 });
    expect(late.status).toBe(409);
    expect(late.body.code).toBe('INVALID_STATE');
    expect((await worker.get(key)).body.operation.status).toBe('outcome_unknown');
    expect((await bob.resolve(key, { status: 'succeeded', note: 'n', expectedAttempt: 2 })).status).toBe(200);
    const ev = await events(key);
    expect(ev.map((e) => e.type)).toEqual([
      'created',
      'marked_unknown',
      'resolution_refused',
      'resolved',
      'acquired',
      'marked_unknown',
      'resolution_refused',
      'resolved',
    ]);
    expect(ev[2]!.detail).toMatchObject({ expectedAttempt: 2, attempt: 1 });
  });
});

describe('races', () => {
  it('two operators resolving one operation at once: exactly one wins, the other gets 409', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const op = round % 2 === 0 ? await unknownOp() : await lapsedOp();
      const [a, b] = await Promise.all([
        alice.resolve(op.key, { status: 'succeeded', note: 'alice says yes', result: { by: 'alice' } }),
        bob.resolve(op.key, {
          status: round % 3 === 0 ? 'ready' : 'failed',
          note: 'bob says no',
          result: { by: 'bob' },
        }),
      ]);
      const statuses = [a.status, b.status].sort();
      expect(statuses, `round ${round}: ${a.raw} / ${b.raw}`).toEqual([200, 409]);
      const [winner, loser, winnerName, loserName] =
        a.status === 200 ? [a, b, 'alice', 'bob'] : [b, a, 'bob', 'alice'];
      expect(loser.body.code).toBe('INVALID_STATE');
      const final = (await worker.get(op.key)).body.operation;
      expect(final).toEqual(winner.body.operation);
      expect(final.resolution.by).toBe(winnerName);
      const ev = await events(op.key);
      expect(ev.filter((e) => e.type === 'resolved').map((e) => e.actor)).toEqual([winnerName]);
      expect(ev.filter((e) => e.type === 'resolution_refused').map((e) => e.actor)).toEqual([loserName]);
      // Oldest first: the refusal is told after the resolution that caused it.
      expect(
        ev.slice(-2).map((e) => e.type),
        `round ${round}`,
      ).toEqual(['resolved', 'resolution_refused']);
    }
  });

  /**
   * The last holder's late complete (succeeded, `{ tracking: 'TRK' }`) against an
   * operator's resolve. Whoever is first changes the operation; the second:
   *   resolve succeeded, equal result -> complete 200, changes nothing
   *   resolve failed                  -> complete 409 RESULT_MISMATCH
   *   resolve ready                   -> complete 409 LEASE_LOST (superseded)
   *   complete first                  -> resolve 409 INVALID_STATE (terminal)
   */
  const LATE = { tracking: 'TRK' };
  const cases = [
    { to: 'succeeded', result: { tracking: 'TRK' }, completeAfterResolve: [200, undefined, undefined] },
    {
      to: 'failed',
      result: { error: 'lost' },
      completeAfterResolve: [409, 'RESULT_MISMATCH', 'result_mismatch'],
    },
    {
      to: 'ready',
      result: undefined,
      completeAfterResolve: [409, 'LEASE_LOST', 'stale_completion_rejected'],
    },
  ] as const;

  for (const c of cases) {
    it(`a late completion racing a resolve to ${c.to}: one changes it, the other is told clearly`, async () => {
      const seen = { complete: 0, resolve: 0 };
      for (let round = 0; round < ROUNDS; round++) {
        const op = round % 2 === 0 ? await unknownOp() : await lapsedOp();
        const before = await types(op.key);
        const body: Record<string, unknown> = { status: c.to, note: 'operator decision' };
        if (c.result) body.result = c.result;
        const [done, res] = await Promise.all([
          worker.complete(op.key, op.leaseId, 'succeeded', LATE),
          alice.resolve(op.key, body),
        ]);
        const final = (await worker.get(op.key)).body.operation;
        const added = (await types(op.key)).slice(before.length).filter((x) => x !== 'lease_expired');
        if (res.status === 200) {
          seen.resolve++;
          // The resolution won; the completion arrived second.
          const [status, code, event] = c.completeAfterResolve;
          expect(done.status, `round ${round}: ${done.raw}`).toBe(status);
          expect(done.body.code).toBe(code);
          expect(final.status).toBe(c.to);
          expect(final.resolution.by).toBe('alice');
          if (c.to !== 'ready') expect(final.result).toEqual(c.result);
          const story = event ? ['resolved', event] : ['resolved'];
          expect([...added].sort(), `round ${round}`).toEqual([...story].sort());
          // Oldest first: the refusal came after, and because of, the resolution.
          expect(added, `round ${round}`).toEqual(story);
        } else {
          seen.complete++;
          // The completion won: it is the real outcome; the operator is told it is settled.
          expect(done.status, `round ${round}: ${done.raw}`).toBe(200);
          expect(res.status).toBe(409);
          expect(res.body.code).toBe('INVALID_STATE');
          expect(final).toMatchObject({ status: 'succeeded', result: LATE, resolution: null });
          const story = ['late_completion', 'resolution_refused'];
          expect([...added].sort(), `round ${round}`).toEqual([...story].sort());
          expect(added, `round ${round}`).toEqual(story);
        }
      }
      expect(seen.complete + seen.resolve).toBe(ROUNDS);
    });
  }

  it('a begin recovering an expired idempotent lease racing a resolve: exactly one takes it', async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const op = await lapsedOp('idempotent_write');
      const [b, r] = await Promise.all([
        worker.begin({ key: op.key, request: REQ }),
        alice.resolve(op.key, { status: 'succeeded', note: 'done already', result: { ok: 1 } }),
      ]);
      const final = (await worker.get(op.key)).body.operation;
      if (r.status === 200) {
        expect(b.status, b.raw).toBe(200);
        expect(b.body.outcome).toBe('replayed');
        expect(final.status).toBe('succeeded');
      } else {
        expect(r.status).toBe(409);
        expect(r.body.code).toBe('INVALID_STATE');
        expect(b.body).toMatchObject({ outcome: 'acquired', recovered: true, lease: { attempt: 2 } });
        expect(final.status).toBe('in_progress');
      }
    }
  });
});
