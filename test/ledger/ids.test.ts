/**
 * New operations and events get UUIDv7 ids (`src/ledger/ids.ts`): canonical
 * text, version 7, RFC 9562 variant, the time in the first 48 bits, and
 * strictly increasing within the process, also within one millisecond and
 * when the clock steps back. And the ids the ledger writes are these.
 */
import { sql } from 'drizzle-orm';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { newId } from '../../src/ledger/ids.js';
import { client } from '../support/http.js';
import { createTestApp, type TestApp } from '../support/service.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const msOf = (id: string) => Number.parseInt(id.slice(0, 8) + id.slice(9, 13), 16);

describe('newId', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('is a canonical version-7 uuid carrying the time', () => {
    const before = Date.now();
    const id = newId();
    const after = Date.now();
    expect(id).toMatch(V7);
    expect(msOf(id)).toBeGreaterThanOrEqual(before);
    expect(msOf(id)).toBeLessThanOrEqual(after);
  });

  it('increases strictly, many to a millisecond, and never repeats', () => {
    const ids = Array.from({ length: 20_000 }, () => newId());
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.every((id) => V7.test(id))).toBe(true);
  });

  it('keeps increasing when the clock steps back', () => {
    const first = newId();
    const now = vi.spyOn(Date, 'now').mockReturnValue(msOf(first) - 60_000);
    const second = newId();
    const third = newId();
    expect(now).toHaveBeenCalled();
    expect(second > first).toBe(true);
    expect(third > second).toBe(true);
    expect(msOf(second)).toBe(msOf(first));
  });

  it('carries a 4,096-id millisecond over into the next', () => {
    const t = Date.now() + 10_000;
    vi.spyOn(Date, 'now').mockReturnValue(t);
    const ids = Array.from({ length: 5_000 }, () => newId());
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    expect(msOf(ids[0]!)).toBe(t);
    expect(msOf(ids.at(-1)!)).toBe(t + 1);
  });

  it('has 62 random bits after the counter', () => {
    // The last 16 hex digits less the variant's two bits: every digit varies.
    const tails = Array.from({ length: 2_000 }, () => newId().slice(19).replace('-', ''));
    for (let d = 0; d < 16; d++)
      expect(new Set(tails.map((t) => t[d])).size).toBeGreaterThan(d === 0 ? 3 : 8);
  });
});

describe('the ids the ledger writes', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it('are UUIDv7, in the order they were made', async () => {
    const api = client(t.app, 'ids');
    const first = await api.begin({ key: 'one', request: { n: 1 }, effect: 'non_idempotent_write' });
    const second = await api.begin({ key: 'two', request: { n: 2 }, effect: 'non_idempotent_write' });
    expect(first.status).toBe(201);
    expect(second.status).toBe(201);
    const done = await api.complete('one', first.body.lease.id, 'succeeded', { ok: true });
    expect(done.status).toBe(200);
    const ops = await t.db.rows<{ key: string; id: string }>(
      sql`SELECT key, id::text AS id FROM idem_operations WHERE scope = 'ids' ORDER BY key`,
    );
    const events = await t.db.rows<{ key: string; id: string; version: number }>(
      sql`SELECT key, id::text AS id, version FROM idem_events WHERE scope = 'ids' ORDER BY key, version`,
    );
    expect(ops.map((o) => o.key)).toEqual(['one', 'two']);
    expect(events.map((e) => [e.key, e.version])).toEqual([
      ['one', 1],
      ['one', 2],
      ['two', 1],
    ]);
    for (const row of [...ops, ...events]) expect(row.id).toMatch(V7);
    expect(ops[0]!.id).toBe(first.body.operation.id);
    expect(ops[1]!.id > ops[0]!.id).toBe(true);
    // created one, created two, then completed one.
    expect(events[2]!.id > events[0]!.id).toBe(true);
    expect(events[1]!.id > events[2]!.id).toBe(true);
  });
});
