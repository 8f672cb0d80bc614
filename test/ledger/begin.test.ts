/** Every row of the begin table (contract section 3), through HTTP. */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, eventCount, expireLease } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

let t: TestApp;
let api: ReturnType<typeof client>;
beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
});
afterAll(() => t.close());

const k = () => `session-42/turn-3/${randomUUID()}`;

describe('begin', () => {
  it('new key: 201 acquired with a lease, attempt 1, dispatched by default', async () => {
    const key = k();
    const r = await api.begin({
      key,
      request: { orderId: 'ORD-1002', amount: 30 },
      effect: 'non_idempotent_write',
    });
    expect(r.status).toBe(201);
    expect(r.body.outcome).toBe('acquired');
    expect(r.body.lease).toMatchObject({ attempt: 1 });
    expect(r.body.lease.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(r.body.operation).toMatchObject({
      key,
      scope: 'orders',
      status: 'in_progress',
      attempt: 1,
      effect: 'non_idempotent_write',
      request: { amount: 30, orderId: 'ORD-1002' },
    });
    expect(r.body.operation.lease.dispatchedAt).not.toBeNull();
    expect(r.body.operation.fingerprint).toMatch(/^sha256:[0-9a-f]{64}$/);
    // The lease id is a secret for the acquirer: never inside the operation.
    expect(JSON.stringify(r.body.operation)).not.toContain(r.body.lease.id);
    expect(new Date(r.body.lease.expiresAt).getTime() - new Date(r.body.operation.createdAt).getTime()).toBe(
      30_000,
    );
  });

  it('dispatch: false leaves the lease undispatched', async () => {
    const r = await api.begin({ key: k(), request: {}, dispatch: false });
    expect(r.status).toBe(201);
    expect(r.body.operation.lease.dispatchedAt).toBeNull();
    expect(r.body.operation.effect).toBe('unclassified');
  });

  it('ready (released): 200 acquired with attempt + 1', async () => {
    const key = k();
    const a = await api.begin({ key, request: { a: 1 } });
    expect((await api.release(key, a.body.lease.id)).status).toBe(200);
    const b = await api.begin({ key, request: { a: 1 } });
    expect(b.status).toBe(200);
    expect(b.body.outcome).toBe('acquired');
    expect(b.body.lease.attempt).toBe(2);
    expect(b.body.lease.id).not.toBe(a.body.lease.id);
    expect(b.body.recovered).toBeUndefined();
  });

  it('expired before dispatch: 200 acquired, attempt + 1, not recovered', async () => {
    const key = k();
    await api.begin({ key, request: { a: 1 }, dispatch: false, effect: 'non_idempotent_write' });
    await expireLease(t.db, 'orders', key);
    expect((await api.get(key)).body.operation.status).toBe('ready');
    const b = await api.begin({ key, request: { a: 1 } });
    expect(b.status).toBe(200);
    expect(b.body.lease.attempt).toBe(2);
    expect(b.body.recovered).toBeUndefined();
  });

  for (const effect of ['read', 'idempotent_write'] as const) {
    it(`expired after dispatch, ${effect}: 200 acquired with recovered: true`, async () => {
      const key = k();
      await api.begin({ key, request: { a: 1 }, effect });
      await expireLease(t.db, 'orders', key);
      const b = await api.begin({ key, request: { a: 1 } });
      expect(b.status).toBe(200);
      expect(b.body).toMatchObject({ outcome: 'acquired', recovered: true, lease: { attempt: 2 } });
      const ev = (await api.events(key)).body.events;
      expect(ev.map((e: { type: string }) => e.type)).toEqual(['created', 'acquired']);
      expect(ev[1].detail.recovered).toBe(true);
    });
  }

  it('same leaseId as the live lease: 200 acquired, the same lease again, nothing changes', async () => {
    const key = k();
    const leaseId = randomUUID();
    const a = await api.begin({ key, request: { a: 1 }, leaseId });
    const b = await api.begin({ key, request: { a: 1 }, leaseId });
    expect(a.status).toBe(201);
    expect(b.status).toBe(200);
    expect(b.body.outcome).toBe('acquired');
    expect(b.body.lease).toEqual(a.body.lease);
    expect(b.body.operation).toEqual(a.body.operation);
  });

  it("someone else's live lease: 409 OPERATION_IN_PROGRESS, retryable, Retry-After", async () => {
    const key = k();
    await api.begin({ key, request: { a: 1 }, leaseMs: 20_000 });
    const r = await api.begin({ key, request: { a: 1 } });
    expect(r.status).toBe(409);
    expect(r.headers['content-type']).toContain('application/problem+json');
    expect(r.body).toMatchObject({ code: 'OPERATION_IN_PROGRESS', retryable: true, status: 409 });
    expect(Number(r.headers['retry-after'])).toBeGreaterThan(15);
    expect(Number(r.headers['retry-after'])).toBeLessThanOrEqual(20);
    expect(r.body.operation.status).toBe('in_progress');
  });

  it('outcome_unknown: 409 OUTCOME_UNKNOWN, not retryable', async () => {
    const key = k();
    const a = await api.begin({ key, request: { a: 1 }, effect: 'non_idempotent_write' });
    await api.unknown(key, a.body.lease.id);
    const r = await api.begin({ key, request: { a: 1 } });
    expect(r.status).toBe(409);
    expect(r.body).toMatchObject({ code: 'OUTCOME_UNKNOWN', retryable: false });
    expect(r.body.operation.status).toBe('outcome_unknown');
  });

  for (const effect of ['non_idempotent_write', 'unclassified'] as const) {
    it(`rule A makes it so (${effect}, dispatched, expired): 409 OUTCOME_UNKNOWN and it is written`, async () => {
      const key = k();
      await api.begin({ key, request: { a: 1 }, effect });
      await expireLease(t.db, 'orders', key);
      const r = await api.begin({ key, request: { a: 1 } });
      expect(r.status).toBe(409);
      expect(r.body.code).toBe('OUTCOME_UNKNOWN');
      const ev = (await api.events(key)).body.events.map((e: { type: string }) => e.type);
      expect(ev).toEqual(['created', 'lease_expired']);
      // Asking again changes nothing more.
      expect((await api.begin({ key, request: { a: 1 } })).body.code).toBe('OUTCOME_UNKNOWN');
      expect((await api.events(key)).body.events).toHaveLength(2);
    });
  }

  for (const status of ['succeeded', 'failed'] as const) {
    it(`${status}: 200 replayed with the stored result and Idempotent-Replayed`, async () => {
      const key = k();
      const a = await api.begin({ key, request: { a: 1 } });
      const done = await api.complete(key, a.body.lease.id, status, { ticket: 'T-1', n: 1.5 });
      expect(done.status).toBe(200);
      const r = await api.begin({ key, request: { a: 1 } });
      expect(r.status).toBe(200);
      expect(r.headers['idempotent-replayed']).toBe('true');
      expect(r.body.outcome).toBe('replayed');
      expect(r.body.lease).toBeUndefined();
      expect(r.body.operation).toMatchObject({ status, result: { ticket: 'T-1', n: 1.5 }, attempt: 1 });
      // Replays are byte-identical.
      const again = await api.begin({ key, request: { a: 1 } });
      expect(again.raw).toBe(r.raw);
    });
  }

  it('any existing key, different fingerprint: 422 KEY_REUSED, nothing changes', async () => {
    const key = k();
    const a = await api.begin({ key, request: { orderId: 'ORD-1' } });
    const before = await api.get(key);
    const r = await api.begin({ key, request: { orderId: 'ORD-2' } });
    expect(r.status).toBe(422);
    expect(r.body).toMatchObject({ code: 'KEY_REUSED', retryable: false });
    expect((await api.get(key)).body).toEqual(before.body);
    // Also when the key is in a state that would otherwise be acquirable.
    await api.release(key, a.body.lease.id);
    const r2 = await api.begin({ key, fingerprint: 'other' });
    expect(r2.status).toBe(422);
    expect((await api.get(key)).body.operation.status).toBe('ready');
  });

  it('the fingerprint is RFC 8785: key order and number spelling do not change it', async () => {
    const key = k();
    const a = await api.call(
      'POST',
      '/v1/scopes/orders/operations',
      `{"key":"${key}","request":{"b":[1.0,2e0],"a":{"y":null,"x":"é"}}}`,
    );
    const b = await api.call(
      'POST',
      '/v1/scopes/orders/operations',
      `{"request":{"a":{"x":"\\u00e9","y":null},"b":[1,2]},"key":"${key}"}`,
    );
    expect(a.status).toBe(201);
    expect(b.status).toBe(409); // same fingerprint: in progress, not KEY_REUSED
    expect(b.body.code).toBe('OPERATION_IN_PROGRESS');
    expect(a.body.operation.request).toEqual({ a: { x: 'é', y: null }, b: [1, 2] });
  });

  it('a client fingerprint is opaque; storeRequest: false stores no request', async () => {
    const key = k();
    const a = await api.begin({ key, fingerprint: 'order-ORD-7-v1' });
    expect(a.body.operation).toMatchObject({ fingerprint: 'order-ORD-7-v1', request: null });
    const b = await api.begin({ key: k(), request: { secret: 'x' }, storeRequest: false });
    expect(b.body.operation.request).toBeNull();
    expect(b.body.operation.fingerprint).toMatch(/^sha256:/);
  });

  it('effect is fixed at creation; later values are ignored', async () => {
    const key = k();
    const a = await api.begin({ key, request: {}, effect: 'read' });
    await api.release(key, a.body.lease.id);
    const b = await api.begin({ key, request: {}, effect: 'non_idempotent_write' });
    expect(b.body.operation.effect).toBe('read');
  });

  it('keys with / and non-ASCII characters are one percent-encoded path segment', async () => {
    const key = `agent/ünïcødé/日本/${randomUUID()}/a b?c#d%`;
    const a = await api.begin({ key, request: {} });
    expect(a.status).toBe(201);
    const g = await api.get(key);
    expect(g.status).toBe(200);
    expect(g.body.operation.key).toBe(key);
    expect((await api.complete(key, a.body.lease.id, 'succeeded', 1)).status).toBe(200);
    expect((await api.getById(a.body.operation.id)).body.operation.key).toBe(key);
  });

  it('new key: exactly one created event; owner and metadata kept', async () => {
    const key = k();
    const before = await eventCount(t.db, 'created');
    const a = await api.begin({
      key,
      request: {},
      owner: 'worker-7',
      metadata: { tool: 'cancel_order', n: 1 },
    });
    expect(a.body.operation.lease.owner).toBe('worker-7');
    expect(a.body.operation.metadata).toEqual({ tool: 'cancel_order', n: 1 });
    expect(await eventCount(t.db, 'created')).toBe(before + 1);
  });
});
