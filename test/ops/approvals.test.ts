/**
 * Approvals (contract sections 1-2; issue 3 item 2): requireApproval, approve
 * (optionally bound to the fingerprint the approver saw), reject, and the
 * deadline, which reads as `rejected` / `expired` at every read before the
 * sweeper and identically after it.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiKey, hashSecret } from '../../src/auth/keys.js';
import { loadConfig } from '../../src/config.js';
import { sweepOnce } from '../../src/ledger/sweeper.js';
import { client, expireApproval, type Reply, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

/** Setup builds databases and fixtures: headroom for a busy machine, not a timing assertion. */
const SETUP_MS = 180_000;

const SCOPE = 'payments';
const keys: ApiKey[] = [
  { name: 'agent-runner', role: 'client', scopes: [SCOPE], sha256: hashSecret('agent-secret') },
  { name: 'alice', role: 'operator', scopes: [SCOPE], sha256: hashSecret('alice-secret') },
  { name: 'bob', role: 'operator', scopes: ['*'], sha256: hashSecret('bob-secret') },
];

let t: TestApp;
let agent: ReturnType<typeof client>;
let alice: ReturnType<typeof client>;
let bob: ReturnType<typeof client>;
beforeAll(async () => {
  t = await createTestApp({ keys });
  agent = client(t.app, SCOPE, 'agent-secret');
  alice = client(t.app, SCOPE, 'alice-secret');
  bob = client(t.app, SCOPE, 'bob-secret');
}, SETUP_MS);
afterAll(() => t.close());

const k = () => `refund/${randomUUID()}`;
const sweep = () => sweepOnce(t.db, loadConfig({}).sweep);
const types = async (key: string) =>
  (await agent.events(key)).body.events.map((e: { type: string }) => e.type);
const rowOf = async (key: string) => (await snapshot(t.db)).find((r) => r.key === key);

async function pending(key: string, extra: Record<string, unknown> = {}) {
  const r = await agent.begin({
    key,
    request: { orderId: 'ORD-9', amount: 120 },
    effect: 'non_idempotent_write',
    requireApproval: true,
    ...extra,
  });
  expect(r.status).toBe(202);
  return r;
}

describe('requireApproval', () => {
  it('202 pending_approval with Retry-After, no lease, attempt 0, a deadline', async () => {
    const key = k();
    const r = await pending(key, { approvalTimeoutMs: 3_600_000 });
    expect(r.body.outcome).toBe('pending_approval');
    expect(r.body.lease).toBeUndefined();
    expect(Number(r.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    const op = r.body.operation;
    expect(op).toMatchObject({ status: 'pending_approval', attempt: 0, lease: null, result: null });
    expect(op.approval).toMatchObject({ state: 'pending', decidedBy: null, decidedAt: null, note: null });
    expect(Date.parse(op.approval.deadline) - Date.parse(op.createdAt)).toBe(3_600_000);
  });

  it('begin again while pending: 202 again, nothing changes; another request under the key: 422', async () => {
    const key = k();
    const first = await pending(key);
    const row = await rowOf(key);
    const again = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
    expect(again.status).toBe(202);
    expect(again.body.outcome).toBe('pending_approval');
    expect(Number(again.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(again.body.operation).toEqual(first.body.operation);
    const reused = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 999 } });
    expect(reused.status).toBe(422);
    expect(reused.body.code).toBe('KEY_REUSED');
    expect(await rowOf(key)).toEqual(row);
    expect(await types(key)).toEqual(['created']);
  });

  it('approve: ready, decided by the operator; the next begin acquires attempt 1', async () => {
    const key = k();
    await pending(key);
    const ok = await alice.approve(key, { note: 'refund confirmed with the customer' });
    expect(ok.status).toBe(200);
    expect(ok.body.operation.status).toBe('ready');
    expect(ok.body.operation.approval).toMatchObject({
      state: 'approved',
      decidedBy: 'alice',
      note: 'refund confirmed with the customer',
    });
    expect(ok.body.operation.approval.decidedAt).not.toBeNull();
    const a = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
    expect(a.status).toBe(200);
    expect(a.body).toMatchObject({ outcome: 'acquired', lease: { attempt: 1 } });
    expect(a.body.operation.status).toBe('in_progress');
    expect(a.body.operation.approval.state).toBe('approved');
    const ev = (await agent.events(key)).body.events;
    expect(ev.map((e: { type: string; actor: string }) => [e.type, e.actor])).toEqual([
      ['created', 'agent-runner'],
      ['approved', 'alice'],
      ['acquired', 'agent-runner'],
    ]);
    expect(ev[1].detail.note).toBe('refund confirmed with the customer');
  });

  it('approve bound to the fingerprint the approver saw: accepted when it is the pending one', async () => {
    const key = k();
    const r = await pending(key);
    const ok = await alice.approve(key, { fingerprint: r.body.operation.fingerprint });
    expect(ok.status).toBe(200);
    expect(ok.body.operation.status).toBe('ready');
  });

  it('approve bound to a stale fingerprint: 409 FINGERPRINT_MISMATCH, only an approval_refused event', async () => {
    const key = k();
    // What the approver saw: the fingerprint of an earlier version of the request.
    const seen = await agent.begin({ key: k(), request: { orderId: 'ORD-9', amount: 12 } });
    await pending(key);
    const before = await rowOf(key);
    const r = await alice.approve(key, { fingerprint: seen.body.operation.fingerprint, note: 'ok' });
    expect(r.status).toBe(409);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.body).toMatchObject({ code: 'FINGERPRINT_MISMATCH', retryable: false });
    expect(await rowOf(key)).toEqual(before);
    const ev = (await agent.events(key)).body.events;
    expect(ev.map((e: { type: string }) => e.type)).toEqual(['created', 'approval_refused']);
    expect(ev[1].actor).toBe('alice');
    // Still pending: the agent is still told to wait, and a right approval still works.
    expect((await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } })).status).toBe(202);
    expect((await alice.approve(key)).status).toBe(200);
  });

  it('approve twice: the second is 409 INVALID_STATE (no longer pending), one approved event', async () => {
    const key = k();
    await pending(key);
    const a = await alice.approve(key);
    const b = await bob.approve(key);
    expect([a.status, b.status]).toEqual([200, 409]);
    expect(b.body.code).toBe('INVALID_STATE');
    expect(b.body.operation).toEqual(a.body.operation);
    expect(b.body.operation.approval.decidedBy).toBe('alice');
    expect(await types(key)).toEqual(['created', 'approved']);
  });

  it('reject: rejected with the stored result, replayed to every later begin', async () => {
    const key = k();
    await pending(key);
    const r = await alice.reject(key, { note: 'over the limit', result: { reason: 'limit', max: 100 } });
    expect(r.status).toBe(200);
    expect(r.body.operation).toMatchObject({
      status: 'rejected',
      result: { reason: 'limit', max: 100 },
      approval: { state: 'rejected', decidedBy: 'alice', note: 'over the limit' },
    });
    expect(r.body.operation.completedAt).not.toBeNull();
    expect(r.body.operation.retainedUntil).not.toBeNull();
    for (let i = 0; i < 2; i++) {
      const b = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
      expect(b.status).toBe(200);
      expect(b.headers['idempotent-replayed']).toBe('true');
      expect(b.body).toMatchObject({ outcome: 'replayed', operation: { status: 'rejected' } });
      expect(b.body.operation.result).toEqual({ reason: 'limit', max: 100 });
      expect(b.body.lease).toBeUndefined();
    }
    const ev = (await agent.events(key)).body.events;
    expect(ev.map((e: { type: string; actor: string }) => [e.type, e.actor])).toEqual([
      ['created', 'agent-runner'],
      ['rejected', 'alice'],
    ]);
    expect(ev[1].detail.note).toBe('over the limit');
  });

  it('reject without a result stores a result that says it was rejected', async () => {
    const key = k();
    await pending(key);
    const r = await alice.reject(key, { note: 'no' });
    expect(r.body.operation.result).not.toBeNull();
    const b = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
    expect(b.body.operation.result).toEqual(r.body.operation.result);
  });

  it('approve after reject: 409 INVALID_STATE; reject after approve: 409 INVALID_STATE; nothing changes', async () => {
    const k1 = k();
    await pending(k1);
    await alice.reject(k1, { note: 'no' });
    const row1 = await rowOf(k1);
    const r1 = await bob.approve(k1, { note: 'yes after all' });
    expect(r1.status).toBe(409);
    expect(r1.body.code).toBe('INVALID_STATE');
    expect(r1.body.operation.status).toBe('rejected');
    expect(await rowOf(k1)).toEqual(row1);

    const k2 = k();
    await pending(k2);
    await alice.approve(k2);
    const row2 = await rowOf(k2);
    const r2 = await bob.reject(k2, { note: 'changed my mind' });
    expect(r2.status).toBe(409);
    expect(r2.body.code).toBe('INVALID_STATE');
    expect(await rowOf(k2)).toEqual(row2);
  });

  it('approve or reject what never asked for approval: 409 INVALID_STATE; of a missing key: 404', async () => {
    const key = k();
    await agent.begin({ key, request: { a: 1 } });
    expect((await alice.approve(key)).body.code).toBe('INVALID_STATE');
    expect((await alice.reject(key)).body.code).toBe('INVALID_STATE');
    const missing = await alice.approve(k());
    expect(missing.status).toBe(404);
    expect(missing.body.code).toBe('NOT_FOUND');
  });
});

describe('approval deadline', () => {
  /** Every way a client or operator can read the operation. */
  async function reads(key: string, id: string) {
    const byKey = await agent.get(key);
    const byId = await agent.getById(id);
    const listed = await bob.call('GET', `/v1/operations?scope=${SCOPE}&status=rejected&limit=500`);
    const pendingList = await bob.call(
      'GET',
      `/v1/operations?scope=${SCOPE}&status=pending_approval&limit=500`,
    );
    expect(byKey.status).toBe(200);
    expect(byId.status).toBe(200);
    expect(listed.status).toBe(200);
    expect(pendingList.status).toBe(200);
    return {
      byKey: byKey.body.operation,
      byId: byId.body.operation,
      listed: listed.body.items.find((o: { key: string }) => o.key === key),
      inPendingList: pendingList.body.items.some((o: { key: string }) => o.key === key),
    };
  }

  function expectExpired(op: Reply['body']) {
    expect(op.status).toBe('rejected');
    expect(op.approval.state).toBe('expired');
    expect(op.approval.decidedBy).toBeNull();
    expect(op.result).not.toBeNull();
    expect(op.completedAt).not.toBeNull();
    expect(op.retainedUntil).not.toBeNull();
  }

  it('a passed deadline reads as rejected/expired at every read before the sweeper, identically after', async () => {
    const key = k();
    const created = await pending(key);
    await expireApproval(t.db, SCOPE, key);
    const stored = await rowOf(key);

    const before = await reads(key, created.body.operation.id);
    expectExpired(before.byKey);
    expect(before.byId).toEqual(before.byKey);
    expect(before.listed).toEqual(before.byKey);
    expect(before.inPendingList).toBe(false);
    // Reading wrote nothing.
    expect(await rowOf(key)).toEqual(stored);

    const swept = await sweep();
    expect(swept.approvalExpired).toBeGreaterThanOrEqual(1);
    expect((await rowOf(key))!.status).toBe('rejected');

    const after = await reads(key, created.body.operation.id);
    expect(after).toEqual(before);

    const ev = (await agent.events(key)).body.events;
    expect(ev.map((e: { type: string; actor: string }) => [e.type, e.actor])).toEqual([
      ['created', 'agent-runner'],
      ['approval_expired', 'sweeper'],
    ]);
    // The lapse says when the deadline passed; the event itself is dated when recorded.
    expect(ev[1].detail.lapsedAt).toBe(before.byKey.approval.deadline);
    expect(Date.parse(ev[1].at)).toBeGreaterThanOrEqual(Date.parse(before.byKey.approval.deadline));

    // A second pass has nothing more to do for it.
    await sweep();
    expect(await types(key)).toEqual(['created', 'approval_expired']);
  });

  it('begin after the deadline, before the sweeper: replayed as rejected, the same operation every read shows', async () => {
    const key = k();
    const created = await pending(key);
    await expireApproval(t.db, SCOPE, key);
    const seen = await reads(key, created.body.operation.id);
    const b = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
    expect(b.status).toBe(200);
    expect(b.headers['idempotent-replayed']).toBe('true');
    expect(b.body.outcome).toBe('replayed');
    expect(b.body.lease).toBeUndefined();
    expectExpired(b.body.operation);
    expect(b.body.operation).toEqual(seen.byKey);
    // The replay is stable, and the sweeper afterwards changes nothing anyone can read.
    const again = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
    expect(again.raw).toBe(b.raw);
    await sweep();
    expect(await reads(key, created.body.operation.id)).toEqual(seen);
    const ev = await types(key);
    expect(ev).toEqual(['created', 'approval_expired']);
  });

  it('approve or reject after the deadline: 409 INVALID_STATE, before and after the sweeper', async () => {
    for (const swept of [false, true]) {
      const key = k();
      await pending(key);
      await expireApproval(t.db, SCOPE, key);
      if (swept) await sweep();
      const row = await rowOf(key);
      const a = await alice.approve(key, { note: 'late' });
      expect(a.status, `approve, swept=${swept}`).toBe(409);
      expect(a.body.code).toBe('INVALID_STATE');
      expectExpired(a.body.operation);
      const r = await alice.reject(key, { note: 'late' });
      expect(r.status, `reject, swept=${swept}`).toBe(409);
      expect(r.body.code).toBe('INVALID_STATE');
      expect(await rowOf(key)).toEqual(row);
      // Still rejected/expired to the agent.
      const b = await agent.begin({ key, request: { orderId: 'ORD-9', amount: 120 } });
      expect(b.body.outcome).toBe('replayed');
      expect(b.body.operation.approval.state).toBe('expired');
    }
  });

  it('the sweeper expires only passed deadlines: a pending approval with time left stays pending', async () => {
    const live = k();
    await pending(live, { approvalTimeoutMs: 3_600_000 });
    const row = await rowOf(live);
    await sweep();
    expect(await rowOf(live)).toEqual(row);
    expect((await agent.get(live)).body.operation.status).toBe('pending_approval');
  });
});
