/**
 * UUIDs have one spelling: 8-4-4-4-12 hex digits, either case (issue 8). The
 * `uuid` format alone admits `urn:uuid:...`, which Postgres cannot cast, so
 * such a lease id or operation id answered 500. Every other spelling is 400
 * INVALID_ARGUMENT naming the field; a well-formed id nobody has is 404.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, snapshot } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

let t: TestApp;
let api: ReturnType<typeof client>;
const F = { key: '', leaseId: '', id: '' };

beforeAll(async () => {
  t = await createTestApp();
  api = client(t.app);
  F.key = `uuid/${randomUUID()}`;
  const r = await api.begin({ key: F.key, request: {}, dispatch: false, leaseMs: 3_600_000 });
  expect(r.status, r.raw).toBe(201);
  F.leaseId = r.body.lease.id;
  F.id = r.body.operation.id;
});
afterAll(() => t.close());

/** Other spellings of `id`, all of which Postgres or Ajv might read as the same UUID. */
const spellings = (id: string): [string, string][] => [
  ['a urn:uuid: prefix', `urn:uuid:${id}`],
  ['a URN:UUID: prefix', `URN:UUID:${id}`],
  ['braces', `{${id}}`],
  ['no dashes', id.replaceAll('-', '')],
  ['dashes every four digits', id.replaceAll('-', '').replace(/(.{4})(?!$)/g, '$1-')],
  ['a leading space', ` ${id}`],
];

function expect400(r: Awaited<ReturnType<typeof api.call>>, field: string, what: string): void {
  expect(r.status, `${what}: ${r.raw}`).toBe(400);
  expect(r.headers['content-type']).toContain('application/problem+json');
  expect(r.body.code).toBe('INVALID_ARGUMENT');
  expect(r.body.field, what).toBe(field);
  expect(r.raw, 'a lease id is never echoed').not.toContain(F.leaseId);
}

describe('a UUID in any other spelling is 400 naming the field', () => {
  for (const [what, make] of [
    ['begin leaseId', (id: string) => ({ key: `uuid/${randomUUID()}`, request: {}, leaseId: id })],
  ] as const) {
    it(what, async () => {
      for (const [how, id] of spellings(randomUUID())) {
        const before = await snapshot(t.db);
        expect400(await api.begin(make(id)), 'leaseId', `${what}, ${how}`);
        expect(await snapshot(t.db)).toEqual(before);
      }
    });
  }

  for (const action of ['dispatch', 'heartbeat', 'complete', 'release', 'unknown'] as const) {
    it(`${action} leaseId (the live lease, respelled)`, async () => {
      const url = `/v1/scopes/orders/operations/${encodeURIComponent(F.key)}/${action}`;
      for (const [how, id] of spellings(F.leaseId)) {
        const body: Record<string, unknown> = { leaseId: id };
        if (action === 'complete') body.status = 'succeeded';
        const before = await snapshot(t.db);
        expect400(await api.call('POST', url, body), 'leaseId', `${action}, ${how}`);
        expect(await snapshot(t.db)).toEqual(before);
      }
    });
  }

  it('GET /v1/operations/{id}', async () => {
    for (const [how, id] of spellings(F.id)) {
      expect400(await api.getById(encodeURIComponent(id)), 'id', `get by id, ${how}`);
    }
  });
});

describe('the canonical spelling, in either case', () => {
  it('a well-formed id nobody has is 404, not 400', async () => {
    const r = await api.getById(randomUUID());
    expect(r.status, r.raw).toBe(404);
    expect(r.body.code).toBe('NOT_FOUND');
  });

  it('an upper-case operation id finds the operation', async () => {
    const r = await api.getById(F.id.toUpperCase());
    expect(r.status, r.raw).toBe(200);
    expect(r.body.operation.id).toBe(F.id);
  });

  it('an upper-case lease id is the same lease: begin re-enters it, the holder calls accept it', async () => {
    const key = `uuid/upper/${randomUUID()}`;
    const leaseId = randomUUID();
    const first = await api.begin({
      key,
      request: { a: 1 },
      leaseId: leaseId.toUpperCase(),
      dispatch: false,
    });
    expect(first.status, first.raw).toBe(201);
    expect(first.body.lease.id).toBe(leaseId);
    // A retried begin with the same client-chosen lease id (any case) is the same acquisition.
    const again = await api.begin({ key, request: { a: 1 }, leaseId });
    expect(again.status, again.raw).toBeLessThan(300);
    expect(again.body.lease?.id).toBe(leaseId);
    const d = await api.dispatch(key, leaseId.toUpperCase());
    expect(d.status, d.raw).toBe(200);
    const c = await api.complete(key, leaseId.toUpperCase(), 'succeeded', { ok: true });
    expect(c.status, c.raw).toBe(200);
    expect(c.body.operation.status).toBe('succeeded');
  });
});
