/**
 * `release` and `unknown` take an optional `reason` (text, at most 1 KiB of
 * UTF-8), recorded in the event's detail so operators see why a lease ended
 * (issue 8, contract section 2).
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

let t: TestApp;
let api: ReturnType<typeof client>;
beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
});
afterAll(() => t.close());

const op = (key: string, action: string) =>
  `/v1/scopes/orders/operations/${encodeURIComponent(key)}/${action}`;

async function acquired(): Promise<{ key: string; leaseId: string }> {
  const key = `reason/${randomUUID()}`;
  const r = await api.begin({ key, request: {}, dispatch: false });
  expect(r.status, r.raw).toBe(201);
  return { key, leaseId: r.body.lease.id };
}

async function lastEvent(key: string) {
  const r = await api.events(key);
  expect(r.status, r.raw).toBe(200);
  return r.body.events[r.body.events.length - 1];
}

describe('the reason is recorded in the event detail', () => {
  for (const [action, event, status] of [
    ['release', 'released', 'ready'],
    ['unknown', 'marked_unknown', 'outcome_unknown'],
  ] as const) {
    it(`${action}: detail.reason`, async () => {
      const { key, leaseId } = await acquired();
      const reason = `upstream timed out after 30 s \u{1F551} (${action})`;
      const r = await api.call('POST', op(key, action), { leaseId, reason });
      expect(r.status, r.raw).toBe(200);
      expect(r.body.operation.status).toBe(status);
      const e = await lastEvent(key);
      expect(e.type).toBe(event);
      expect(e.detail.reason).toBe(reason);
    });

    it(`${action} without a reason records none`, async () => {
      const { key, leaseId } = await acquired();
      const r = await api.call('POST', op(key, action), { leaseId });
      expect(r.status, r.raw).toBe(200);
      const e = await lastEvent(key);
      expect(e.type).toBe(event);
      expect(e.detail).not.toHaveProperty('reason');
    });

    it(`${action}: exactly 1 KiB of UTF-8 is accepted`, async () => {
      const { key, leaseId } = await acquired();
      const reason = `${'é'.repeat(511)}xx`; // 511 * 2 + 2 = 1024 bytes
      const r = await api.call('POST', op(key, action), { leaseId, reason });
      expect(r.status, r.raw).toBe(200);
      expect((await lastEvent(key)).detail.reason).toBe(reason);
    });

    it(`${action}: a reason over 1 KiB, empty, or not text is 400 and changes nothing`, async () => {
      const { key, leaseId } = await acquired();
      for (const [what, reason] of [
        ['1025 ASCII characters', 'x'.repeat(1025)],
        ['1024 characters of 2 bytes each (2 KiB)', 'é'.repeat(1024)],
        ['513 two-byte characters (1026 bytes)', 'é'.repeat(513)],
        ['empty', ''],
        ['a number', 7],
        ['null', null],
      ] as const) {
        const r = await api.call('POST', op(key, action), { leaseId, reason });
        expect(r.status, `${what}: ${r.raw}`).toBe(400);
        expect(r.body).toMatchObject({ code: 'INVALID_ARGUMENT', field: 'reason' });
      }
      expect((await api.get(key)).body.operation.status).toBe('in_progress');
    });
  }

  it('other lease-holder calls do not take a reason', async () => {
    const { key, leaseId } = await acquired();
    for (const action of ['dispatch', 'heartbeat']) {
      const r = await api.call('POST', op(key, action), { leaseId, reason: 'x' });
      expect(r.status, r.raw).toBe(400);
      expect(r.body.field).toBe('reason');
    }
  });
});
